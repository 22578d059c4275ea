"""Safe extraction of verified tarballs into a flat ``node_modules`` the sandbox binds read-only.

Only regular files and directories under ``package/``; no symlinks, hard links or devices; no
absolute or ``..`` paths; each member's size checked against its header and the running totals
checked against the file-count and unpacked-size limits.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from baton.errors import GatewayError
from baton.gateway.policy import Policy

MAX_PACKAGE_UNPACKED_BYTES = 40 * 1024 * 1024
MAX_PACKAGE_FILES = 4_096


@dataclass(frozen=True)
class Extracted:
    """The materialized tree and what it holds."""

    root: Path
    file_count: int
    unpacked_bytes: int


def _relative(name: str) -> PurePosixPath | None:
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or name.startswith("/"):
        raise GatewayError("artifact_archive_path_invalid", f"Archive member {name!r} escapes the package.")
    if pure.parts[0] != "package":
        raise GatewayError("artifact_archive_root_invalid", f"Archive member {name!r} lies outside package/.")
    return PurePosixPath(*pure.parts[1:]) if len(pure.parts) > 1 else None


def _member_target(member: tarfile.TarInfo, destination: Path) -> Path | None:
    """Where a member goes, or None for the package root; refuses links and non-files."""
    if member.issym() or member.islnk():
        raise GatewayError("artifact_archive_path_invalid", f"Archive member {member.name!r} is a link.")
    relative = _relative(member.name)
    if relative is None:
        return None
    if not (member.isdir() or member.isfile()):
        raise GatewayError(
            "artifact_archive_member_type_invalid", f"Archive member {member.name!r} is not a file."
        )
    return destination / relative


def _extract_members(
    archive: tarfile.TarFile, name: str, destination: Path, max_files: int, max_bytes: int
) -> tuple[int, int]:
    files = size = 0
    for member in archive:
        target = _member_target(member, destination)
        if target is None:
            continue
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        files, size = files + 1, size + member.size
        if files > max_files or size > max_bytes:
            raise GatewayError(
                "artifact_archive_limits_exceeded",
                f"{name} exceeds {max_files} files or {max_bytes} unpacked bytes.",
            )
        source = archive.extractfile(member)
        content = source.read(member.size + 1) if source else b""
        if len(content) != member.size:
            raise GatewayError(
                "artifact_archive_member_size_mismatch", f"Archive member {member.name!r} has the wrong size."
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return files, size


def extract_package(
    tarball: Path,
    destination: Path,
    *,
    max_files: int = MAX_PACKAGE_FILES,
    max_bytes: int = MAX_PACKAGE_UNPACKED_BYTES,
) -> tuple[int, int]:
    """Extract one npm tarball's ``package/`` into ``destination``; returns (files, bytes)."""
    try:
        with tarfile.open(tarball, mode="r:gz") as archive:
            return _extract_members(archive, tarball.name, destination, max_files, max_bytes)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise GatewayError(
            "artifact_tarball_invalid", f"{tarball.name} is not a readable gzipped tar: {exc}."
        ) from None


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
    """Re-check each tarball against the policy's sha512, extract it safely, and make the tree read-only."""
    node_modules = root / "node_modules"
    node_modules.mkdir(parents=True)
    files = size = 0
    for artifact in policy.artifacts:
        if artifact.ecosystem != "npm":
            raise GatewayError(
                "sandbox_unavailable", "Replay runs npm packages; PyPI artifacts are lock-only."
            )
        tarball = (
            bundle / "tarballs" / f"{artifact.name.lstrip('@').replace('/', '-')}-{artifact.version}.tgz"
        )
        try:
            data = tarball.read_bytes()
        except OSError:
            raise GatewayError(
                "artifact_tarball_unreadable", f"{tarball.name} is missing from the bundle."
            ) from None
        if hashlib.sha512(data).hexdigest() != artifact.sha512:
            raise GatewayError(
                "artifact_tarball_checksum_mismatch",
                f"{tarball.name} differs from its sha512 pin.",
                package=artifact.key,
            )
        destination = node_modules / artifact.name
        destination.mkdir(parents=True)
        count, unpacked = extract_package(tarball, destination)
        _check_identity(destination, artifact.name, artifact.version)
        files, size = files + count, size + unpacked
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o444)
    return Extracted(root=root, file_count=files, unpacked_bytes=size)
