"""Safe unpacking of one verified npm tarball, and the check every pinned file passes before it is read.

Only regular files and directories under ``package/``; no symlinks, hard links or devices; no
absolute or ``..`` paths; each member's size checked against its header and the running totals
checked against the file-count and unpacked-size limits.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path, PurePosixPath

from baton.errors import GatewayError
from baton.gateway.policy.policy import Artifact

MAX_PACKAGE_UNPACKED_BYTES = 256 * 1024 * 1024  # @azure/mcp-linux-x64 unpacks to 137 MiB
MAX_PACKAGE_FILES = 8_192


def _relative(name: str, root: str = "package") -> PurePosixPath | None:
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or name.startswith("/"):
        raise GatewayError("artifact_archive_path_invalid", f"Archive member {name!r} escapes the package.")
    if pure.parts[0] != root:
        raise GatewayError("artifact_archive_root_invalid", f"Archive member {name!r} lies outside {root}/.")
    return PurePosixPath(*pure.parts[1:]) if len(pure.parts) > 1 else None


def _member_target(member: tarfile.TarInfo, destination: Path, root: str) -> Path | None:
    """Where a member goes, or None for the package root; refuses links and non-files."""
    if member.issym() or member.islnk():
        raise GatewayError("artifact_archive_path_invalid", f"Archive member {member.name!r} is a link.")
    relative = _relative(member.name, root)
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
    root: str | None = None
    for member in archive:
        if root is None:
            # npm strips the first path component whatever its name: "package/" for most tarballs,
            # the package's own name for @types; every member must share the first one's.
            first = PurePosixPath(member.name).parts[:1]
            root = first[0] if first and first[0] not in ("..", "/", ".") else "package"
        target = _member_target(member, destination, root)
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
        if member.mode & 0o111:
            target.chmod(0o755)  # a shipped binary (esbuild, @azure/mcp-linux-x64) stays executable
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


def checked_bytes(bundle: Path, artifact: Artifact) -> Path:
    """The artifact's file in the bundle, after checking it against the policy's sha512 once more."""
    filename = artifact.filename or f"{artifact.name.lstrip('@').replace('/', '-')}-{artifact.version}.tgz"
    path = bundle / "tarballs" / filename
    try:
        data = path.read_bytes()
    except OSError:
        raise GatewayError("artifact_tarball_unreadable", f"{filename} is missing from the bundle.") from None
    if hashlib.sha512(data).hexdigest() != artifact.sha512:
        raise GatewayError(
            "artifact_tarball_checksum_mismatch",
            f"{filename} differs from its sha512 pin.",
            package=artifact.key,
        )
    return path
