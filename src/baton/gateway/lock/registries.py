"""Registry clients for lock: npm metadata + ``dist.integrity``, PyPI JSON + published sha256.

Only exact versions leave this module: ranges are resolved here, once, at lock time, and the
result is written into the policy.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from baton.errors import GatewayError

MAX_METADATA_BYTES = 64 * 1024 * 1024
MAX_TARBALL_BYTES = 256 * 1024 * 1024
NPM_ABBREVIATED = "application/vnd.npm.install-v1+json"
EXACT_SEMVER = re.compile(
    r"^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)


@dataclass(frozen=True)
class Fetched:
    """One package fetched and checked against its registry's integrity value."""

    ecosystem: str
    name: str
    version: str
    filename: str
    content: bytes
    source_url: str
    registry_integrity: str
    sha256: str | None = None
    bin: dict[str, str] = field(default_factory=dict)
    dependencies: dict[str, str] = field(default_factory=dict)
    skipped_optional: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"

    @property
    def sha512_hex(self) -> str:
        """sha512 of the tarball or wheel bytes."""
        return hashlib.sha512(self.content).hexdigest()


def pinned_version(spec: str) -> str | None:
    """``spec`` itself when it is an exact semver version, else None."""
    return spec if EXACT_SEMVER.fullmatch(spec) else None


def max_satisfying(versions: list[str], spec: str) -> str | None:
    """The newest valid version satisfying ``spec``; non-semver entries never crash it."""
    import nodesemver

    try:
        return nodesemver.max_satisfying(versions, spec, loose=False)  # type: ignore[no-any-return]
    except (ValueError, TypeError):
        raise GatewayError("adapter_candidate_invalid", f"{spec!r} is not a version range.") from None


def tarball_filename(name: str, version: str) -> str:
    """A flat, safe file name for a package tarball."""
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def sri_sha512_hex(integrity: str) -> str:
    """The hex digest in an ``sha512-<base64>`` integrity string (anything weaker is refused)."""
    for token in integrity.split():
        algorithm, _, digest = token.partition("-")
        if algorithm == "sha512":
            try:
                return base64.b64decode(digest, validate=True).hex()
            except ValueError:
                break
    raise GatewayError("artifact_integrity_mismatch", "The registry publishes no sha512 integrity value.")


class Registries:
    """HTTP access to npm and PyPI with a verified download cache."""

    def __init__(self, npm_url: str, pypi_url: str, cache_dir: Path | None, timeout: float = 60.0) -> None:
        self.npm_url = npm_url.rstrip("/")
        self.pypi_url = pypi_url.rstrip("/")
        self.cache_dir = cache_dir
        self.client = httpx.Client(timeout=timeout, follow_redirects=True)
        self._packuments: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()

    def _get(self, url: str, *, accept: str = "application/json", limit: int = MAX_METADATA_BYTES) -> bytes:
        try:
            with self.client.stream("GET", url, headers={"Accept": accept}) as response:
                if response.status_code != 200:
                    raise GatewayError(
                        "artifact_fetch_failed", f"{url} answered HTTP {response.status_code}.", url=url
                    )
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise GatewayError("artifact_fetch_failed", f"{url} is larger than {limit} bytes.")
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.HTTPError as exc:
            raise GatewayError(
                "artifact_fetch_failed", f"{url} could not be fetched: {exc}.", url=url
            ) from None

    def _json(self, url: str, accept: str = "application/json") -> dict[str, Any]:
        import json

        try:
            value = json.loads(self._get(url, accept=accept))
        except (ValueError, RecursionError):
            raise GatewayError("artifact_metadata_invalid", f"{url} did not return JSON.") from None
        if not isinstance(value, dict):
            raise GatewayError("artifact_metadata_invalid", f"{url} did not return a JSON object.")
        return value

    def json_document(self, url: str, accept: str = "application/json") -> dict[str, Any]:
        """A JSON object from the registry (metadata errors are ``artifact_metadata_invalid``)."""
        return self._json(url, accept=accept)

    def packument(self, name: str) -> dict[str, Any]:
        """The abbreviated packument of ``name`` (fetched once per client)."""
        if name not in self._packuments:
            self._packuments[name] = self._json(
                f"{self.npm_url}/{quote(name, safe='@')}", accept=NPM_ABBREVIATED
            )
        return self._packuments[name]

    def download(self, url: str, filename: str, check: str, digest: str) -> bytes:
        """A tarball or wheel from the verified cache, or fetched (the caller checks the bytes)."""
        content = self._cached(filename, check, digest)
        if content is None:
            content = self._get(url, accept="*/*", limit=MAX_TARBALL_BYTES)
        return content

    def checked_download(
        self, url: str, filename: str, check: str, digest: str, mismatch: str, package: str
    ) -> bytes:
        """A tarball or wheel whose ``check`` digest is ``digest``: from the verified cache, or fetched,
        checked and then cached; bytes that do not match are ``artifact_integrity_mismatch`` (``mismatch``
        is its sentence) and are never cached."""
        content = self._cached(filename, check, digest)
        if content is None:
            content = self._get(url, accept="*/*", limit=MAX_TARBALL_BYTES)
            if hashlib.new(check, content).hexdigest() != digest:
                raise GatewayError("artifact_integrity_mismatch", mismatch, package=package)
            self._store(filename, content)
        return content

    def remember(self, filename: str, content: bytes) -> None:
        """Keep checked bytes in the download cache."""
        self._store(filename, content)

    def npm_manifest(self, name: str, spec: str) -> dict[str, Any]:
        """The version manifest of ``name`` matching an exact version or a semver range."""
        if pinned_version(spec):
            return self._json(f"{self.npm_url}/{quote(name, safe='@')}/{spec}")
        packument = self.packument(name)
        documents = packument.get("versions")
        if not isinstance(documents, dict):
            raise GatewayError("artifact_metadata_invalid", f"The registry lists no versions of {name}.")
        tags = packument.get("dist-tags")
        chosen = tags.get(spec) if isinstance(tags, dict) else None
        if chosen is None:
            chosen = max_satisfying([v for v in documents if pinned_version(str(v))], spec or "*")
        if not chosen or not isinstance(documents.get(chosen), dict):
            raise GatewayError(
                "artifact_dependency_unresolvable", f"No version of {name} satisfies {spec!r}.", package=name
            )
        manifest: dict[str, Any] = documents[chosen]
        return manifest

    def _cached(self, filename: str, check: str, digest: str) -> bytes | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / filename
        if not path.is_file():
            return None
        content = path.read_bytes()
        return content if hashlib.new(check, content).hexdigest() == digest else None

    def _store(self, filename: str, content: bytes) -> None:
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_dir / f".{filename}.tmp"
            tmp.write_bytes(content)
            tmp.replace(self.cache_dir / filename)

    def fetch_npm(self, name: str, spec: str, *, pinned_sha512: str | None = None) -> Fetched:
        """Fetch one npm tarball and check it against ``dist.integrity`` (and the policy's pin)."""
        manifest = self.npm_manifest(name, spec)
        version = str(manifest.get("version"))
        if manifest.get("name") != name or (spec == pinned_version(spec) and version != spec):
            raise GatewayError(
                "artifact_fetch_failed",
                f"The registry answered {manifest.get('name')}@{version} for {name}@{spec}.",
            )
        dist = manifest.get("dist") or {}
        integrity = str(dist.get("integrity") or "")
        expected = sri_sha512_hex(integrity)
        if pinned_sha512 is not None and pinned_sha512 != expected:
            raise GatewayError(
                "artifact_integrity_mismatch",
                f"The registry's sha512 of {name}@{version} differs from the policy's pin.",
                package=f"{name}@{version}",
            )
        filename = tarball_filename(name, version)
        content = self.checked_download(
            str(dist.get("tarball")),
            filename,
            "sha512",
            expected,
            f"The tarball of {name}@{version} does not match the registry's dist.integrity.",
            f"{name}@{version}",
        )
        bin_field = manifest.get("bin") or {}
        bins = {name.rsplit("/", 1)[-1]: bin_field} if isinstance(bin_field, str) else dict(bin_field)
        return Fetched(
            ecosystem="npm",
            name=name,
            version=version,
            filename=filename,
            content=content,
            source_url=str(dist.get("tarball")),
            registry_integrity=integrity,
            bin=bins,
            dependencies=dict(manifest.get("dependencies") or {}),
            skipped_optional=tuple(sorted(manifest.get("optionalDependencies") or {})),
        )

    def fetch_pypi(self, name: str, version: str, *, filename: str | None = None) -> Fetched:
        """Fetch one wheel and check it against the sha256 PyPI publishes for it."""
        release = self._json(f"{self.pypi_url}/pypi/{quote(name)}/{quote(version)}/json")
        urls = release.get("urls")
        wheels = [
            u
            for u in (urls if isinstance(urls, list) else [])
            if isinstance(u, dict) and u.get("packagetype") == "bdist_wheel"
        ]
        if filename is not None:
            wheels = [u for u in wheels if u.get("filename") == filename]
        else:
            wheels.sort(key=lambda u: not str(u.get("filename", "")).endswith("-none-any.whl"))
        if not wheels:
            raise GatewayError(
                "artifact_fetch_failed", f"PyPI lists no matching wheel for {name}=={version}."
            )
        wheel = wheels[0]
        expected = str((wheel.get("digests") or {}).get("sha256") or "")
        content = self.checked_download(
            str(wheel["url"]),
            str(wheel["filename"]),
            "sha256",
            expected,
            f"The wheel of {name}=={version} does not match the sha256 PyPI publishes.",
            f"{name}@{version}",
        )
        return Fetched(
            ecosystem="pypi",
            name=name,
            version=version,
            filename=str(wheel["filename"]),
            content=content,
            source_url=str(wheel["url"]),
            registry_integrity=f"sha256:{expected}",
            sha256=expected,
        )
