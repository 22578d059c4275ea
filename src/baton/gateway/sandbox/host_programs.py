"""Host programs a server spawns (git, a language server), pinned by path and sha256 like the interpreter.

The sandbox sees the host's ``/usr`` (and the policy's read-only mounts), so a server can run any program
there. The policy declares the ones it runs (``runtime.host_programs = ["/usr/bin/git"]``, or
``lock --host-program PATH``); the first ``replay --apply`` records each one's real path and sha256 in
``[[host_programs]]``, and ``check``, every replay and every upstream start in ``baton serve`` recompute
them and refuse with ``adapter_runtime_drift`` when one differs, is gone or was never pinned. Programs are
declared rather than observed: seeing what a server executes would take tracing every replay (strace or
a seccomp notifier), and a program a replay did not happen to run would go unpinned anyway.
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy.policy import HostProgram, Policy
from baton.gateway.policy.policy_files import write_policy

#: Host trees the sandbox binds read-only at the same path (``/bin``, ``/lib``… are ``/usr``'s on merged-usr).
SANDBOX_VISIBLE = ("/usr", "/bin", "/sbin", "/lib", "/lib64")


def _visible(real: Path, policy: Policy) -> bool:
    """Whether the sandbox can reach ``real``: a system tree it binds, or a read-only mount's host side."""
    trees = [PurePosixPath(t) for t in SANDBOX_VISIBLE]
    trees += [PurePosixPath(str(Path(m.host).resolve())) for m in policy.runtime.mounts if m.mode == "ro"]
    pure = PurePosixPath(str(real))
    return any(pure == tree or tree in pure.parents for tree in trees)


def observe(path: str, policy: Policy) -> dict[str, str]:
    """``{path, real_path, sha256}`` of a declared program as the host has it now."""
    real = Path(path).resolve()
    if not real.is_file():
        raise GatewayError(
            "adapter_runtime_unavailable",
            f"The host program {path} is not there (a regular file).",
            program=path,
        )
    if not _visible(real, policy):
        raise GatewayError(
            "adapter_policy_invalid",
            f"The host program {path} ({real}) is outside what the sandbox sees: /usr and the read-only mounts.",
            program=path,
        )
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return {"path": path, "real_path": str(real), "sha256": digest.hexdigest()}


def check_host_programs(policy: Policy, *, unpinned_ok: bool = False) -> None:
    """Refuse (``adapter_runtime_drift``) a declared program that is unpinned, gone or changed since its pin.

    ``unpinned_ok`` (``check``, a replay plan): a program no replay has pinned yet passes; the pinned ones
    are still checked."""
    if policy.runtime.sandbox == "docker":
        return  # the image digest pins what the container runs
    pins = {pin.path: pin for pin in policy.host_programs}
    for path in policy.runtime.host_programs:
        pin = pins.get(path)
        if pin is None:
            if unpinned_ok:
                continue
            raise GatewayError(
                "adapter_runtime_drift",
                f"The host program {path} is declared but not pinned; replay --apply records its pin.",
                program=path,
                next=f"baton gateway replay {policy.id} --apply",
            )
        try:
            now = observe(path, policy)
        except GatewayError as exc:
            raise GatewayError(
                "adapter_runtime_drift", exc.message, program=path, next=f"baton gateway lock {policy.id}"
            ) from None
        drifted = [key for key in ("real_path", "sha256") if now[key] != getattr(pin, key)]
        if drifted:
            raise GatewayError(
                "adapter_runtime_drift",
                f"The host program {path} changed since replay pinned it ({', '.join(drifted)}): pinned "
                f"{pin.real_path} sha256 {pin.sha256[:12]}…, found {now['real_path']} sha256 "
                f"{now['sha256'][:12]}…; to accept it, lock again (which re-pins it), then verify and "
                "replay --apply.",
                program=path,
                drifted=drifted,
                next=f"baton gateway lock {policy.id}",
            )


def pin_new(path: Path, policy: Policy) -> Policy:
    """Record the pin of each declared program that has none yet (``replay --apply``), then check them all."""
    if policy.runtime.sandbox == "docker":
        return policy
    pinned = {pin.path for pin in policy.host_programs}
    fresh = [observe(p, policy) for p in policy.runtime.host_programs if p not in pinned]
    if fresh:
        pins = [*policy.host_programs, *(HostProgram.model_validate(row) for row in fresh)]
        policy = policy.model_copy(update={"host_programs": pins})
        write_policy(path, policy)
    check_host_programs(policy)
    return policy


def repin(policy: Policy) -> Policy:
    """Every declared program pinned as the host has it now (``lock ID``: locking again accepts them)."""
    if policy.runtime.sandbox == "docker" or not policy.runtime.host_programs:
        return policy
    pins = [HostProgram.model_validate(observe(p, policy)) for p in policy.runtime.host_programs]
    return policy.model_copy(update={"host_programs": pins})


def pins_view(policy: Policy) -> list[dict[str, Any]]:
    """The pins as receipts record them."""
    return [pin.model_dump() for pin in policy.host_programs]
