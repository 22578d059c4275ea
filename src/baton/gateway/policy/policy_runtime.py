"""The ``[runtime]`` table of an adapter policy: how the server starts and what the sandbox gives it.

Its isolation fields admit only one value; its host mounts, host programs, variables and egress are
validated here by shape (the host itself is checked at every start, :mod:`baton.gateway.sandbox.mounts`).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field, field_validator, model_validator

from baton.config import SENSITIVE_ENV_NAMES
from baton.gateway.policy.policy_table import PolicyTable

ORIGIN_PATTERN = r"^https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?$"
SIZE_PATTERN = re.compile(r"^([1-9][0-9]*)([kmg]?)$")


#: Host trees a mount may not be, contain or lie in (the system, the kernel's views, root's home).
MOUNT_SYSTEM_TREES = (
    "/proc", "/sys", "/dev", "/etc", "/boot", "/root", "/usr", "/bin", "/sbin",
    "/lib", "/lib32", "/lib64", "/libx32", "/var", "/run", "/snap", "/lost+found",
)  # fmt: skip
#: Sandbox paths the sandbox itself uses; a mount may not be, contain or lie under one.
SANDBOX_RESERVED = (
    "/work", "/tmp", "/proc", "/dev", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc",  # noqa: S108
    "/run/baton-egress", "/opt/baton",
)  # fmt: skip
#: tmpfs options the sandbox can enforce (mount(8) applies them; nosuid and nodev are always added).
TMPFS_OPTIONS = re.compile(r"^(?:rw|noexec|exec|nosuid|nodev|size=[1-9][0-9]*[kmg]?|mode=[0-7]{3,4})$")


ENV_NAME_PATTERN = r"[A-Z_][A-Z0-9_]{0,63}"


def host_variable_may_be_given(name: str) -> bool:
    """Whether a host variable may be handed to an adapter: never one of baton's own credentials."""
    return name not in SENSITIVE_ENV_NAMES and not name.startswith("BATON_")


def _overlaps(path: PurePosixPath, trees: tuple[str, ...]) -> str | None:
    """The first tree that ``path`` is, lies in, or contains."""
    for tree in map(PurePosixPath, trees):
        if path == tree or tree in path.parents or path in tree.parents:
            return str(tree)
    return None


class Mount(PolicyTable):
    """A host directory (or file) given to the server at ``sandbox``, read-only or read-write."""

    host: str = Field(min_length=2, max_length=4096)
    sandbox: str = Field(min_length=2, max_length=4096)
    mode: Literal["ro", "rw"] = "ro"
    #: An ``rw`` mount is ``noexec,nosuid,nodev`` unless the policy lets the server run what it writes there.
    exec: bool | None = None

    @field_validator("host", "sandbox")
    @classmethod
    def _absolute_and_normal(cls, value: str) -> str:
        pure = PurePosixPath(value)
        if not pure.is_absolute() or str(pure) != value or ".." in pure.parts or pure == PurePosixPath("/"):
            raise ValueError(f"{value!r} is not a normalized absolute path other than /")
        if re.search(r"[\x00-\x1f\x7f:]", value):
            raise ValueError(f"{value!r} holds a control character or ':'")
        return value

    @model_validator(mode="after")
    def _not_system(self) -> Mount:
        tree = _overlaps(PurePosixPath(self.host), MOUNT_SYSTEM_TREES)
        if tree is not None:
            raise ValueError(f"host path {self.host} overlaps the system tree {tree}")
        reserved = _overlaps(PurePosixPath(self.sandbox), SANDBOX_RESERVED)
        if reserved is not None:
            raise ValueError(f"sandbox path {self.sandbox} shadows the sandbox's own {reserved}")
        return self


def _drop_all() -> list[Literal["ALL"]]:
    return ["ALL"]


class RuntimeSpec(PolicyTable):
    """How the server starts and what it may use; the isolation fields admit only one value."""

    sandbox: Literal["bubblewrap", "docker", "landlock"] = "bubblewrap"
    entrypoint: list[str] = Field(min_length=1)
    arguments: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: Sandbox variable → the host variable baton reads at each start (a credential goes by reference,
    #: never as a stored value; see ``lock --env NAME=env:HOST_VAR``).
    env_from_host: dict[str, str] = Field(default_factory=dict, max_length=64)
    #: ``allowlist`` grants, at run time only, egress to ``allowed_origins`` through baton's proxy.
    network: Literal["none", "allowlist"] = "none"
    allowed_origins: list[str] = Field(default_factory=list, max_length=64)
    #: A browser adapter: /dev/shm in the sandbox and ``--headless`` following BROWSER_HEADLESS.
    browser: bool = False
    call_timeout_seconds: int = Field(default=60, gt=0, le=3600)
    read_only_root: Literal[True] = True
    no_new_privileges: Literal[True] = True
    cap_drop: list[Literal["ALL"]] = Field(default_factory=lambda: _drop_all(), min_length=1, max_length=1)
    user: Literal["65534:65534"] = "65534:65534"
    memory_limit: str = "2g"
    pids_limit: int = Field(default=256, gt=0, le=65536)
    #: A share of CPUs; enforced by a cpu cgroup (bubblewrap) or --cpus (docker), else the start is refused.
    cpu_limit: str | None = Field(
        default=None, pattern=r"^(?:0\.[0-9]*[1-9][0-9]*|[1-9][0-9]*(?:\.[0-9]+)?)$"
    )
    cpu_seconds: int = Field(default=120, gt=0, le=86400)
    tmpfs: str = "/tmp:rw,noexec,nosuid,size=64m"  # noqa: S108 -- the sandbox's own tmpfs, not a host path
    #: Host directories given to the server (validated again against the host at every start).
    mounts: list[Mount] = Field(default_factory=list, max_length=16)
    #: Host programs the server spawns (``/usr/bin/git``); replay pins each in ``[[host_programs]]``.
    host_programs: list[str] = Field(default_factory=list, max_length=32)
    startup_timeout_seconds: int = Field(default=30, gt=0, le=600)
    shutdown_timeout_seconds: int = Field(default=5, gt=0, le=120)
    image: str | None = Field(
        default=None, pattern=r"^[a-z0-9.-]+(?::[0-9]+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$"
    )
    platform: str = "linux/amd64"

    @field_validator("memory_limit")
    @classmethod
    def _size(cls, value: str) -> str:
        if not SIZE_PATTERN.fullmatch(value):
            raise ValueError("memory_limit takes a size such as 512m or 2g")
        return value

    @field_validator("tmpfs")
    @classmethod
    def _tmpfs(cls, value: str) -> str:
        path, sep, options = value.partition(":")
        if path != "/tmp" or not sep:  # noqa: S108 -- the sandbox's path
            raise ValueError("tmpfs is '/tmp:OPTIONS'")
        for option in options.split(","):
            if not TMPFS_OPTIONS.fullmatch(option):
                raise ValueError(f"tmpfs option {option!r} cannot be enforced by the sandbox")
        return value

    @field_validator("host_programs")
    @classmethod
    def _program_paths(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("host programs repeat")
        for path in value:
            pure = PurePosixPath(path)
            if not pure.is_absolute() or str(pure) != path or ".." in pure.parts or len(path) > 4096:
                raise ValueError(f"host program {path!r} is not a normalized absolute path")
            if re.search(r"[\x00-\x1f\x7f]", path):
                raise ValueError(f"host program {path!r} holds a control character")
        return value

    @field_validator("mounts")
    @classmethod
    def _distinct_mounts(cls, value: list[Mount]) -> list[Mount]:
        targets = [PurePosixPath(m.sandbox) for m in value]
        for index, target in enumerate(targets):
            for other in targets[index + 1 :]:
                if target == other or target in other.parents or other in target.parents:
                    raise ValueError(f"mounts at {target} and {other} overlap")
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if not re.fullmatch(ORIGIN_PATTERN, origin):
                raise ValueError(f"allowed origin {origin!r} is not scheme://host[:port]")
        return value

    @field_validator("env")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]{0,63}", name) or name in SENSITIVE_ENV_NAMES:
                raise ValueError(f"env name {name!r} is malformed or names a credential")
        return value

    @field_validator("env_from_host")
    @classmethod
    def _references(cls, value: dict[str, str]) -> dict[str, str]:
        for name, host in value.items():
            if not re.fullmatch(ENV_NAME_PATTERN, name):
                raise ValueError(f"env name {name!r} is malformed")
            if not re.fullmatch(ENV_NAME_PATTERN, host) or not host_variable_may_be_given(host):
                raise ValueError(f"host variable {host!r} is malformed or is one of baton's own credentials")
        return value

    @model_validator(mode="after")
    def _env_once(self) -> RuntimeSpec:
        both = set(self.env) & set(self.env_from_host)
        if both:
            raise ValueError(f"env names {sorted(both)} are given both as a value and by reference")
        return self

    def memory_bytes(self) -> int:
        """``memory_limit`` in bytes."""
        match = SIZE_PATTERN.fullmatch(self.memory_limit)
        assert match is not None
        return int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]
