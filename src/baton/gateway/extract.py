"""Safe extraction of verified tarballs (and wheels) into a tree the sandbox binds read-only.

Only regular files and directories under ``package/``; no symlinks, hard links or devices; no
absolute or ``..`` paths; each member's size checked against its header and the running totals
checked against the file-count and unpacked-size limits.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy import Artifact, Policy

MAX_PACKAGE_UNPACKED_BYTES = 256 * 1024 * 1024  # @azure/mcp-linux-x64 unpacks to 137 MiB
MAX_PACKAGE_FILES = 8_192
#: Wheels of compiled libraries (numpy, lxml ...) unpack much larger than npm packages.
MAX_WHEEL_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_WHEEL_FILES = 16_384


@dataclass(frozen=True)
class Extracted:
    """The materialized tree and what it holds."""

    root: Path
    file_count: int
    unpacked_bytes: int


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


def _checked_bytes(bundle: Path, artifact: Artifact) -> Path:
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


def materialize(policy: Policy, bundle: Path, root: Path) -> Extracted:
    """Re-check each package against the policy's sha512, lay it out safely, and make the tree read-only.

    npm packages go where the bundle's lockfile puts them (nested where npm nests), or to
    ``node_modules/<name>`` for a hand-written flat policy; wheels are installed with hashes required
    into ``site-packages``, which baton's boot file puts on an isolated interpreter's path.
    """
    from baton.gateway.interpreter import check_interpreter_pin

    check_interpreter_pin(policy)
    root.joinpath("node_modules").mkdir(parents=True, exist_ok=True)
    files = size = 0
    npm = [a for a in policy.artifacts if a.ecosystem == "npm"]
    if npm:
        for artifact, destination in _npm_layout(policy, bundle, root, npm):
            path = _checked_bytes(bundle, artifact)
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
            path = _checked_bytes(bundle, artifact)
            count, unpacked = extract_wheel(path, root / "site-packages", artifact)
            files, size = files + count, size + unpacked
    if wheels:
        (root / "baton_boot.py").write_text(BOOT, encoding="utf-8")
        write_console_launchers(root, policy.runtime.entrypoint[0])
    for item in [root, *root.rglob("*")]:
        if item.is_dir():
            item.chmod(0o755)
        else:
            item.chmod(0o555 if item.stat().st_mode & 0o100 else 0o444)
    return Extracted(root=root, file_count=files, unpacked_bytes=size)


#: The isolated interpreter's boot (``python3 -I -S baton_boot.py TARGET``): no host site-packages,
#: dist-packages, user site or host ``.pth``; only the bundle's own site directory (and its ``.pth``).
BOOT = """import site, sys
site.addsitedir("/work/site-packages")
target, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
if ":" in target:
    import importlib
    module, _, attribute = target.partition(":")
    value = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    sys.exit(value())
import runpy
runpy.run_module(target, run_name="__main__", alter_sys=True)
"""


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
    from baton.gateway.npm_resolve import LOCK_PATH

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


CONSOLE_SCRIPT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CONSOLE_SCRIPT_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,200}:[A-Za-z_][A-Za-z0-9_.]{0,100}$")


def write_console_launchers(root: Path, python: str) -> list[str]:
    """``bin/NAME`` for each console script the installed wheels declare, run by the isolated interpreter.

    Servers that run their own package's command (semgrep-mcp runs ``semgrep``) find it on the sandbox's
    PATH. A launcher starts the same isolated boot as the server itself, never the host's site, and is
    written from the wheel's ``entry_points.txt`` (checked names and targets only; nothing else runs).
    """
    import configparser
    import shlex

    launchers: dict[str, str] = {}
    for entry_points in sorted((root / "site-packages").glob("*.dist-info/entry_points.txt")):
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(entry_points.read_text(encoding="utf-8"))
        except (configparser.Error, UnicodeDecodeError):
            continue
        if not parser.has_section("console_scripts"):
            continue
        for name, value in parser.items("console_scripts"):
            target = value.split("[", 1)[0].replace(" ", "")
            if CONSOLE_SCRIPT_NAME.fullmatch(name) and CONSOLE_SCRIPT_TARGET.fullmatch(target):
                launchers.setdefault(name, target)
    if not launchers:
        return []
    directory = root / "bin"
    directory.mkdir(exist_ok=True)
    for name, target in launchers.items():
        (directory / name).write_text(
            f'#!/bin/sh\nexec {shlex.quote(python)} -I -S /work/baton_boot.py {target} "$@"\n',
            encoding="utf-8",
        )
        (directory / name).chmod(0o755)
    return sorted(launchers)


def install_wheels(policy: Policy, bundle: Path, root: Path, wheels: list[Artifact]) -> tuple[int, int]:
    """``uv pip install --require-hashes --no-deps --offline`` of the checked wheels into ``site-packages``."""
    import subprocess
    import tempfile

    from baton.gateway.closure import uv_binary, uv_env

    for artifact in wheels:
        path = _checked_bytes(bundle, artifact)
        try:
            with zipfile.ZipFile(path) as archive:
                _wheel_members(archive, path.name, MAX_WHEEL_FILES, MAX_WHEEL_UNPACKED_BYTES)
        except (zipfile.BadZipFile, OSError) as exc:
            raise GatewayError(
                "artifact_tarball_invalid", f"{path.name} is not a readable wheel: {exc}."
            ) from None
    python = policy.interpreter.path if policy.interpreter else "python3"
    with tempfile.TemporaryDirectory(prefix="baton-wheels-") as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text(
            "".join(f"{a.name}=={a.version} --hash=sha256:{a.sha256}\n" for a in wheels), encoding="utf-8"
        )
        argv = [
            uv_binary(), "pip", "install", "--require-hashes", "--no-deps", "--offline", "--no-index",
            "--find-links", str(bundle / "tarballs"), "--target", str(root / "site-packages"),
            "--python", python, "--no-config", "--quiet", "--color", "never", "--no-compile",
            "-r", str(requirements),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                argv, capture_output=True, env=uv_env(scratch), cwd=scratch, timeout=300, check=False
            )
        except subprocess.TimeoutExpired:
            raise GatewayError("artifact_install_failed", "uv did not install the wheels in time.") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip()[-400:]
        raise GatewayError("artifact_install_failed", f"The pinned wheels do not install: {tail}")
    site = root / "site-packages"
    installed = [p for p in site.rglob("*") if p.is_file() or p.is_symlink()]
    if any(p.is_symlink() for p in installed):
        raise GatewayError("artifact_archive_member_type_invalid", "A wheel installed a symlink.")
    if len(installed) > MAX_WHEEL_FILES * len(wheels):
        raise GatewayError("artifact_archive_limits_exceeded", "The wheels install too many files.")
    return len(installed), sum(p.stat().st_size for p in installed)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_members(
    archive: zipfile.ZipFile, name: str, max_files: int, max_bytes: int
) -> list[zipfile.ZipInfo]:
    members, size = [], 0
    for info in archive.infolist():
        pure = PurePosixPath(info.filename)
        if pure.is_absolute() or ".." in pure.parts or "\\" in info.filename or not pure.parts:
            raise GatewayError(
                "artifact_archive_path_invalid", f"Wheel member {info.filename!r} escapes the wheel."
            )
        mode = (info.external_attr >> 16) & 0o170000
        if mode == stat.S_IFLNK:
            raise GatewayError("artifact_archive_path_invalid", f"Wheel member {info.filename!r} is a link.")
        if mode not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise GatewayError(
                "artifact_archive_member_type_invalid", f"Wheel member {info.filename!r} is not a file."
            )
        if info.is_dir():
            continue
        members.append(info)
        size += info.file_size
        if len(members) > max_files or size > max_bytes:
            raise GatewayError(
                "artifact_archive_limits_exceeded", f"{name} exceeds {max_files} files or {max_bytes} bytes."
            )
    return members


def extract_wheel(
    wheel: Path,
    site: Path,
    artifact: Artifact,
    *,
    max_files: int = MAX_PACKAGE_FILES,
    max_bytes: int = MAX_PACKAGE_UNPACKED_BYTES,
) -> tuple[int, int]:
    """Extract one wheel into ``site`` with the same rules as tarballs; its METADATA must name the pin."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = _wheel_members(archive, wheel.name, max_files, max_bytes)
            metadata = {}
            for info in members:
                content = archive.open(info).read(info.file_size + 1)
                if len(content) != info.file_size:
                    raise GatewayError(
                        "artifact_archive_member_size_mismatch", f"{info.filename!r} has the wrong size."
                    )
                target = site / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                if info.filename.endswith(".dist-info/METADATA"):
                    metadata = dict(
                        line.split(": ", 1)
                        for line in content.decode("utf-8", "replace").splitlines()
                        if ": " in line
                    )
    except (zipfile.BadZipFile, OSError) as exc:
        raise GatewayError(
            "artifact_tarball_invalid", f"{wheel.name} is not a readable wheel: {exc}."
        ) from None
    if (
        _normalized(metadata.get("Name", "")) != _normalized(artifact.name)
        or metadata.get("Version") != artifact.version
    ):
        raise GatewayError(
            "package_identity_mismatch", f"The wheel pinned as {artifact.key} is another package."
        )
    return len(members), sum(info.file_size for info in members)
