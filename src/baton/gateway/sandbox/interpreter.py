"""The interpreter that runs an adapter's server (node or python), pinned by path, version and sha256.

The sandbox sees the host's ``/usr``, so the interpreter is a host binary: lock records which one (its
real path after symlinks), what it says its version is and the sha256 of its bytes. Replay and every
runtime start recompute the three and block on drift with ``adapter_runtime_drift``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.gateway.sandbox.bwrap_command import HOST_PATH

#: Where a bare ``node`` or ``python3`` resolves in the sandbox: its PATH's system part, the host's own.
SANDBOX_SEARCH_PATH = HOST_PATH
PYTHON_NAME = re.compile(r"^python3(?:\.[0-9]{1,2})?$")


def _kind(executable: str) -> str | None:
    base = Path(executable).name
    if base in ("node", "nodejs"):
        return "node"
    if PYTHON_NAME.fullmatch(base):
        return "python"
    return None


def locate(executable: str) -> Path:
    """The real path of the entrypoint's interpreter as the sandbox would find it."""
    found = executable if os.path.isabs(executable) else shutil.which(executable, path=SANDBOX_SEARCH_PATH)
    if found is None or not Path(found).is_file():
        raise GatewayError(
            "adapter_runtime_unavailable",
            f"The interpreter {executable!r} is not installed where the sandbox looks ({SANDBOX_SEARCH_PATH}).",
        )
    return Path(found).resolve()


def _version(path: Path, kind: str) -> str:
    argv = (
        [str(path), "--version"]
        if kind == "node"
        else [str(path), "-I", "-S", "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"]
    )
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=30, check=False, env={"PATH": "/usr/bin:/bin"}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GatewayError("adapter_runtime_unavailable", f"{path} does not run: {exc}.") from None
    version = done.stdout.decode("utf-8", "replace").strip().removeprefix("v")
    if done.returncode != 0 or not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*", version):
        raise GatewayError("adapter_runtime_unavailable", f"{path} does not report a version.")
    return version


def observe(executable: str) -> dict[str, str] | None:
    """``{kind, command, path, version, sha256}`` of the entrypoint's interpreter; None for other commands."""
    kind = _kind(executable)
    if kind is None:
        return None
    path = locate(executable)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return {
        "kind": kind,
        "command": executable,
        "path": str(path),
        "version": _version(path, kind),
        "sha256": digest.hexdigest(),
    }


def python_version(executable: str) -> tuple[str, tuple[int, int]]:
    """The real path of a python interpreter and its (major, minor)."""
    pinned = observe(executable)
    if pinned is None or pinned["kind"] != "python":
        raise GatewayError("adapter_runtime_unavailable", f"{executable!r} is not a python interpreter.")
    major, minor = pinned["version"].split(".")[:2]
    return pinned["path"], (int(major), int(minor))


def check_interpreter_pin(policy: Any) -> None:
    """Block with ``adapter_runtime_drift`` when the interpreter differs from the one lock pinned.

    ``policy`` is a :class:`baton.gateway.policy.policy.Policy`; a policy without a pin (never locked by this
    version, or a docker image that carries its own interpreter) passes.
    """
    pin = getattr(policy, "interpreter", None)
    if pin is None or policy.runtime.sandbox == "docker":
        return
    if pin.package is not None:
        _check_bundled_pin(policy, pin)
        return
    try:
        now = observe(pin.command)
    except GatewayError as exc:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The pinned interpreter is gone: {exc.message}",
            pinned=pin.path,
            next=f"baton gateway lock {policy.id}",
        ) from None
    if policy.runtime.entrypoint[0] != pin.command:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The entrypoint runs {policy.runtime.entrypoint[0]!r}; lock pinned {pin.command!r}.",
        )
    drifted = [key for key in ("path", "version", "sha256") if now is None or now[key] != getattr(pin, key)]
    if drifted:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The interpreter {pin.command} changed since lock ({', '.join(drifted)}): pinned "
            f"{pin.path} {pin.version}, found {now['path'] if now else '?'} {now['version'] if now else '?'}; "
            "lock, verify and replay again to accept it.",
            drifted=drifted,
            next=f"baton gateway lock {policy.id}",
        )


def _check_bundled_pin(policy: Any, pin: Any) -> None:
    """A runtime from the bundle: the entrypoint runs it and the policy pins its package's exact tarball.

    Its bytes are checked where they are laid out (the tarball against its sha512, then ``bin/node``
    against the pinned sha256, in :func:`baton.gateway.replay.extract.materialize`).
    """
    if policy.runtime.entrypoint[0] != pin.command:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The entrypoint runs {policy.runtime.entrypoint[0]!r}; lock pinned the bundled {pin.command!r}.",
        )
    pinned = {(a.name, a.version, a.sha512) for a in policy.artifacts if a.ecosystem == "npm"}
    if (pin.package, pin.version, pin.tarball_sha512) not in pinned:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The bundled runtime {pin.package}@{pin.version} is not among the policy's pinned artifacts; "
            "lock, verify and replay again.",
        )
