"""The tree the sandbox binds read-only, laid out from a verified bundle.

npm packages are unpacked (:mod:`baton.gateway.lock.tarballs`) where the bundle's lockfile puts them; wheels go
into ``site-packages`` (:mod:`baton.gateway.lock.wheels`); every file is checked against its pin first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.gateway.lock import node_runtime
from baton.gateway.lock.tarballs import checked_bytes, extract_package
from baton.gateway.lock.wheels import (
    BOOT,
    MIB,
    extract_wheel,
    install_wheels,
    wheel_cap_mb,
    write_console_launchers,
)
from baton.gateway.policy.policy import Artifact, Policy


@dataclass(frozen=True)
class Extracted:
    """The materialized tree and what it holds."""

    root: Path
    file_count: int
    unpacked_bytes: int


def _check_identity(directory: Path, name: str, version: str) -> None:
    try:
        manifest = json.loads((directory / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise GatewayError(
            "package_identity_mismatch", f"{name}@{version} has no readable package.json."
        ) from None
    if not isinstance(manifest, dict) or manifest.get("name") != name or manifest.get("version") != version:
        raise GatewayError(
            "package_identity_mismatch", f"The tarball pinned as {name}@{version} is another package."
        )


def materialize(policy: Policy, bundle: Path, root: Path) -> Extracted:
    """Re-check each package against the policy's sha512, lay it out safely, and make the tree read-only.

    npm packages go where the bundle's lockfile puts them (nested where npm nests), or to
    ``node_modules/<name>`` for a hand-written flat policy; wheels are installed with hashes required
    into ``site-packages``, which baton's boot file puts on an isolated interpreter's path.
    """
    from baton.gateway.sandbox.interpreter import check_interpreter_pin

    check_interpreter_pin(policy)
    root.joinpath("node_modules").mkdir(parents=True, exist_ok=True)
    files = size = 0
    npm = [a for a in policy.artifacts if a.ecosystem == "npm"]
    if npm:
        for artifact, destination in _npm_layout(policy, bundle, root, npm):
            path = checked_bytes(bundle, artifact)
            destination.mkdir(parents=True, exist_ok=True)
            count, unpacked = extract_package(path, destination)
            _check_identity(destination, artifact.name, artifact.version)
            files, size = files + count, size + unpacked
    wheels = [a for a in policy.artifacts if a.ecosystem == "pypi"]
    if wheels and policy.resolution.pypi_requirements_sha256:
        count, unpacked = install_wheels(policy, bundle, root, wheels)
        files, size = files + count, size + unpacked
    else:
        for artifact in wheels:
            path = checked_bytes(bundle, artifact)
            cap = wheel_cap_mb(policy) * MIB
            count, unpacked = extract_wheel(path, root / "site-packages", artifact, max_bytes=cap)
            files, size = files + count, size + unpacked
    if policy.interpreter is not None and policy.interpreter.bundled:
        node_runtime.check_binary(policy.interpreter, root)
    if wheels:
        (root / "baton_boot.py").write_text(BOOT, encoding="utf-8")
        write_console_launchers(root, policy.runtime.entrypoint[0])
    for item in [root, *root.rglob("*")]:
        if item.is_dir():
            item.chmod(0o755)
        else:
            item.chmod(0o555 if item.stat().st_mode & 0o100 else 0o444)
    return Extracted(root=root, file_count=files, unpacked_bytes=size)


def _lockfile(policy: Policy, bundle: Path) -> dict[str, Any] | None:
    expected = policy.resolution.npm_lockfile_sha256
    if expected is None:
        return None
    try:
        data = (bundle / "package-lock.json").read_bytes()
    except OSError:
        raise GatewayError(
            "artifact_bundle_invalid", "package-lock.json is missing from the bundle."
        ) from None
    if hashlib.sha256(data).hexdigest() != expected:
        raise GatewayError("artifact_tarball_checksum_mismatch", "package-lock.json differs from its pin.")
    value: dict[str, Any] = json.loads(data)
    return value


def _npm_layout(policy: Policy, bundle: Path, root: Path, npm: list[Artifact]) -> list[tuple[Artifact, Path]]:
    """(artifact, directory) pairs, parents first: the lockfile's paths, or the flat layout."""
    from baton.gateway.lock.npm_resolve import LOCK_PATH

    lockfile = _lockfile(policy, bundle)
    if lockfile is None:
        return [(a, root / "node_modules" / a.name) for a in npm]
    by_key = {(a.name, a.version): a for a in npm}
    skipped = set(policy.resolution.skipped_optional)
    layout = []
    for path, entry in sorted((lockfile.get("packages") or {}).items(), key=lambda kv: kv[0].count("/")):
        if path == "" or path in skipped or not isinstance(entry, dict) or entry.get("inBundle"):
            continue
        if not LOCK_PATH.fullmatch(path) or ".." in path.split("/"):
            raise GatewayError("artifact_archive_path_invalid", f"The lockfile names an odd path {path!r}.")
        name = str(entry.get("name") or path.rsplit("node_modules/", 1)[-1])
        artifact = by_key.get((name, str(entry.get("version"))))
        if artifact is None:
            raise GatewayError(
                "artifact_bundle_package_set_mismatch",
                f"The lockfile installs {name}@{entry.get('version')} at {path}, which the policy does not pin.",
            )
        layout.append((artifact, root / path))
    return layout
