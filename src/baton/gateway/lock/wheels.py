"""Wheels into the tree's ``site-packages``: checked, installed with hashes required, run by an isolated boot.

A wheel's members follow the tarballs' rules (no link, no escaping path, size limits); its console
scripts become launchers that start the same isolated interpreter as the server.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from pathlib import Path, PurePosixPath

from baton.errors import GatewayError
from baton.gateway.lock.registries import Fetched
from baton.gateway.lock.tarballs import MAX_PACKAGE_FILES, MAX_PACKAGE_UNPACKED_BYTES, checked_bytes
from baton.gateway.policy.policy import Artifact, Policy

MIB = 1024 * 1024

#: Wheels of compiled libraries (numpy, lxml ...) unpack much larger than npm packages; an adapter whose
#: wheel is larger still (opencv: 301 MB) raises its own cap (``lock --max-wheel-mb``).
DEFAULT_MAX_WHEEL_MB = 256
MAX_WHEEL_UNPACKED_BYTES = DEFAULT_MAX_WHEEL_MB * 1024 * 1024
MAX_WHEEL_FILES = 16_384

#: The isolated interpreter's boot (``python3 -I -S baton_boot.py TARGET``): no host site-packages,
#: dist-packages, user site or host ``.pth``; only the bundle's own site directory (and its ``.pth``),
#: found beside the boot file (``/work`` under bubblewrap, the tree's host path under Landlock).
BOOT = """import os, site, sys
site.addsitedir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
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
            f'#!/bin/sh\nexec {shlex.quote(python)} -I -S "$(dirname -- "$0")/../baton_boot.py" {target} "$@"\n',
            encoding="utf-8",
        )
        (directory / name).chmod(0o755)
    return sorted(launchers)


def wheel_cap_mb(policy: Policy) -> int:
    """The policy's per-wheel unpacked size cap in MiB."""
    return policy.resolution.max_wheel_mb or DEFAULT_MAX_WHEEL_MB


def check_wheel_sizes(fetched: list[Fetched], cap_mb: int) -> None:
    """Refuse at lock a wheel that unpacks past the cap, naming the flag and the size that admits it."""
    for item in fetched:
        if item.ecosystem != "pypi":
            continue
        try:
            with zipfile.ZipFile(io.BytesIO(item.content)) as archive:
                size = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, OSError) as exc:
            raise GatewayError(
                "artifact_tarball_invalid", f"{item.filename} is not a readable wheel: {exc}."
            ) from None
        if size > cap_mb * MIB:
            needed = -(-size // MIB)
            raise GatewayError(
                "artifact_archive_limits_exceeded",
                f"{item.filename} unpacks to {needed} MiB, over the per-wheel cap of {cap_mb} MiB. Raise this "
                f"adapter's cap with --max-wheel-mb {needed} (recorded as resolution.max_wheel_mb).",
                package=item.key,
                unpacked_bytes=size,
                max_wheel_mb=needed,
            )


def install_wheels(policy: Policy, bundle: Path, root: Path, wheels: list[Artifact]) -> tuple[int, int]:
    """``uv pip install --require-hashes --no-deps --offline`` of the checked wheels into ``site-packages``."""
    import subprocess

    from baton.gateway.lock.pypi_closure import uv_binary, uv_env
    from baton.gateway.sandbox.scratch import directory as scratch_dir

    for artifact in wheels:
        path = checked_bytes(bundle, artifact)
        try:
            with zipfile.ZipFile(path) as archive:
                _wheel_members(archive, path.name, MAX_WHEEL_FILES, wheel_cap_mb(policy) * MIB)
        except (zipfile.BadZipFile, OSError) as exc:
            raise GatewayError(
                "artifact_tarball_invalid", f"{path.name} is not a readable wheel: {exc}."
            ) from None
    python = policy.interpreter.path if policy.interpreter else "python3"
    with scratch_dir("wheels") as scratch:
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
                argv, capture_output=True, env=uv_env(str(scratch)), cwd=scratch, timeout=300, check=False
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
