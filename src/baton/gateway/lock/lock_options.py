"""``lock``'s command-line settings: mounts, environment (credentials by reference), the entrypoint and
the host programs the server spawns."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from baton.errors import GatewayError
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import validation_failure
from baton.gateway.policy.policy_runtime import (
    ENV_NAME_PATTERN,
    Mount,
    RuntimeSpec,
    host_variable_may_be_given,
)

#: A variable whose name says it holds a secret is taken only by reference to a host variable.
CREDENTIAL_NAME = re.compile(r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIAL|AUTH)", re.I)


def _invalid(flag: str, value: str, reason: str) -> GatewayError:
    return GatewayError("adapter_policy_invalid", f"{flag} {value!r} is refused: {reason}.", field=flag)


@dataclass
class LockOptions:
    """What ``lock`` was told on the command line; empty fields leave the policy as it is."""

    mounts: list[Mount] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    env_from_host: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] | None = None
    host_programs: list[str] = field(default_factory=list)
    #: The per-wheel unpacked size cap in MiB (``--max-wheel-mb``), recorded as ``resolution.max_wheel_mb``.
    max_wheel_mb: int | None = None

    def empty(self) -> bool:
        """Whether nothing was given."""
        runtime = self.mounts or self.env or self.env_from_host or self.entrypoint or self.host_programs
        return not (runtime or self.max_wheel_mb is not None)


def parse_mount(text: str) -> Mount:
    """``HOST:SANDBOX[:ro|rw|rw+exec]`` to a mount (``rw+exec`` lets the server run what it writes)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise _invalid("--mount", text, "it is not HOST:SANDBOX[:ro|rw|rw+exec]")
    mode = parts[2] if len(parts) == 3 else "ro"
    if mode not in ("ro", "rw", "rw+exec"):
        raise _invalid("--mount", text, f"the mode {mode!r} is none of ro, rw, rw+exec")
    try:
        return Mount(
            host=parts[0],
            sandbox=parts[1],
            mode="ro" if mode == "ro" else "rw",
            exec=True if mode == "rw+exec" else None,
        )
    except ValidationError as exc:
        raise _invalid("--mount", text, str(exc.errors()[0]["msg"])) from None


def parse_env(text: str) -> tuple[str, str, bool]:
    """``NAME=VALUE``, ``NAME=env:HOST_VAR`` or ``NAME=$HOST_VAR`` to (name, value or host variable, by reference)."""
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(ENV_NAME_PATTERN, name):
        raise _invalid("--env", name or text, "it is not NAME=VALUE with NAME in [A-Z0-9_]")
    reference = re.fullmatch(r"(?:env:|\$)\{?([A-Za-z_][A-Za-z0-9_]*)\}?", value)
    if reference:
        host = reference.group(1)
        if not re.fullmatch(ENV_NAME_PATTERN, host) or not host_variable_may_be_given(host):
            raise _invalid(
                "--env", name, f"the host variable {host} is malformed or one of baton's own credentials"
            )
        return name, host, True
    if CREDENTIAL_NAME.search(name):
        # the value is never echoed: it may be the secret the shell already expanded
        raise _invalid(
            "--env",
            name,
            f"{name} names a credential, which is never stored as a value; pass it by reference to a host "
            f"variable: --env {name}=env:HOST_VAR (or '{name}=$HOST_VAR' in single quotes)",
        )
    return name, value, False


def parse_options(
    mounts: list[str], env: list[str], entrypoint: str | None, host_programs: list[str] | None = None
) -> LockOptions:
    """Parse every ``lock`` flag at once (before anything is fetched)."""
    options = LockOptions(mounts=[parse_mount(m) for m in mounts], host_programs=list(host_programs or []))
    for item in env:
        name, value, by_reference = parse_env(item)
        if name in options.env or name in options.env_from_host:
            raise _invalid("--env", name, "it is given twice")
        (options.env_from_host if by_reference else options.env)[name] = value
    if entrypoint is not None:
        try:
            words = shlex.split(entrypoint)
        except ValueError as exc:
            raise _invalid("--entrypoint", entrypoint, str(exc)) from None
        if not words:
            raise _invalid("--entrypoint", entrypoint, "it is empty")
        options.entrypoint = words
    return options


def apply_options(policy: Policy, options: LockOptions) -> Policy:
    """The policy with the command line's mounts, environment and entrypoint (validated as a whole)."""
    if options.empty():
        return policy
    current = policy.runtime.model_dump()
    update: dict[str, Any] = {}
    if options.mounts:
        kept = [m for m in current["mounts"] if m["sandbox"] not in {n.sandbox for n in options.mounts}]
        update["mounts"] = kept + [m.model_dump(exclude_none=True) for m in options.mounts]
    if options.env or options.env_from_host:
        given = set(options.env) | set(options.env_from_host)
        update["env"] = {k: v for k, v in current["env"].items() if k not in given} | options.env
        update["env_from_host"] = {
            k: v for k, v in current["env_from_host"].items() if k not in given
        } | options.env_from_host
    if options.entrypoint:
        update["entrypoint"] = options.entrypoint
    if options.host_programs:
        update["host_programs"] = [
            *current["host_programs"],
            *(p for p in options.host_programs if p not in current["host_programs"]),
        ]
    try:
        runtime = RuntimeSpec.model_validate({**current, **update})
    except ValidationError as exc:
        raise validation_failure(exc, "The policy", at="runtime.") from None
    resolution = policy.resolution
    if options.max_wheel_mb is not None:
        resolution = resolution.model_copy(update={"max_wheel_mb": options.max_wheel_mb})
    return policy.model_copy(update={"runtime": runtime, "resolution": resolution})
