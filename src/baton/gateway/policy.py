"""Adapter policies (SPEC.md section 6): one TOML file per external MCP server, validated fail-closed.

Every field is checked; each kind of failure has its own error class (raised by
:func:`baton.gateway.policy_files.parse_policy`) so a caller can tell an expired policy from a weakened
sandbox from a malformed file. This module is the document's schema; reading and writing the files is
:mod:`baton.gateway.policy_files`.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from baton.config import SENSITIVE_ENV_NAMES
from baton.gateway.constraints import CONSTRAINT_PATTERN, MAX_CONSTRAINT_LENGTH, MAX_CONSTRAINTS
from baton.receipts import canonical_json, sha256_hex

ADAPTER_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
SHA512_PATTERN = r"^[0-9a-f]{128}$"
#: npm (optionally scoped) and PyPI names; no path separators beyond the scope's one slash, no "..".
PACKAGE_NAME_PATTERN = r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*$"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
ORIGIN_PATTERN = r"^https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?$"
SIZE_PATTERN = re.compile(r"^([1-9][0-9]*)([kmg]?)$")
DEFAULT_PROTOCOL_VERSION = "2025-11-25"


#: Host trees a mount may not be, contain or lie in (the system, the kernel's views, root's home).
SYSTEM_TREES = (
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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Mount(_Strict):
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
        tree = _overlaps(PurePosixPath(self.host), SYSTEM_TREES)
        if tree is not None:
            raise ValueError(f"host path {self.host} overlaps the system tree {tree}")
        reserved = _overlaps(PurePosixPath(self.sandbox), SANDBOX_RESERVED)
        if reserved is not None:
            raise ValueError(f"sandbox path {self.sandbox} shadows the sandbox's own {reserved}")
        return self


def _drop_all() -> list[Literal["ALL"]]:
    return ["ALL"]


class Identity(_Strict):
    """Who the adapter is, who owns it and until when the policy holds."""

    id: str = Field(pattern=ADAPTER_ID_PATTERN)
    candidate: str = Field(min_length=1, max_length=200)
    risk_class: Literal["low", "medium", "high"]
    owner: str = Field(min_length=1, max_length=200)
    expires_at: str

    @field_validator("expires_at")
    @classmethod
    def _aware_iso(cls, value: str) -> str:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError("expires_at is not ISO 8601") from exc
        if parsed.tzinfo is None:
            raise ValueError("expires_at needs a time zone")
        return value

    def expires(self) -> datetime:
        """``expires_at`` as an aware datetime."""
        return datetime.fromisoformat(self.expires_at)


class Artifact(_Strict):
    """One exact package: the set of these is everything the server runs, nothing resolved later."""

    ecosystem: Literal["npm", "pypi"]
    name: str = Field(min_length=1, max_length=214, pattern=PACKAGE_NAME_PATTERN)
    version: str = Field(min_length=1, max_length=128, pattern=r"^[0-9A-Za-z][0-9A-Za-z.+_-]*$")
    sha512: str = Field(pattern=SHA512_PATTERN)
    sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    filename: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.+-]{1,255}$")

    @field_validator("name", "version")
    @classmethod
    def _no_dot_dot(cls, value: str) -> str:
        if ".." in value:
            raise ValueError("package names and versions may not contain '..'")
        return value

    @property
    def key(self) -> str:
        """``name@version``, the key the receipts use."""
        return f"{self.name}@{self.version}"


class RuntimeSpec(_Strict):
    """How the server starts and what it may use; the isolation fields admit only one value."""

    sandbox: Literal["bubblewrap", "docker"] = "bubblewrap"
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


class ClientSpec(_Strict):
    """What the replay declares to the server: the protocol version and the client capabilities."""

    protocol_version: str = Field(default=DEFAULT_PROTOCOL_VERSION, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    capabilities: dict[str, Any] = Field(default_factory=dict)
    roots: list[dict[str, str]] = Field(default_factory=list)

    @field_validator("capabilities")
    @classmethod
    def _known(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = set(value) - {"roots", "sampling", "elicitation", "experimental"}
        if unknown:
            raise ValueError(f"unknown client capabilities {sorted(unknown)}")
        return value


class Contract(_Strict):
    """The pinned observation: identity of the server and the three tool hashes."""

    protocol_version: str = Field(min_length=1)
    server_name: str = Field(min_length=1)
    server_version: str = Field(max_length=256)  # some servers report an empty version; pinned as is
    tool_count: int = Field(ge=0)
    tool_name_set_sha256: str = Field(pattern=SHA256_PATTERN)
    tool_schema_manifest_sha256: str = Field(pattern=SHA256_PATTERN)
    tool_definition_sha256: str = Field(pattern=SHA256_PATTERN)


class Tools(_Strict):
    """Which upstream tools the client may see, which are hidden, which wait for a human."""

    allowed: list[str] = Field(default_factory=list)
    denied: list[str] = Field(default_factory=list)
    approval_required: list[str] = Field(default_factory=list)
    #: Write the arguments themselves into call receipts (default: only their sha256).
    record_arguments: bool = False
    #: How long an approval waits for a human (default: HITL_TIMEOUT_SECONDS).
    approval_timeout_seconds: int | None = Field(default=None, ge=1, le=30 * 86_400)
    #: Destructive tools the owner explicitly allows without a human approval.
    allow_destructive_without_approval: list[str] = Field(default_factory=list)
    #: approval_required tools whose approval needs a passkey step-up, whatever the risk class.
    step_up: list[str] = Field(default_factory=list)
    #: Per approval_required tool: how many distinct people must approve a call (default 1).
    required_approvals: dict[str, Annotated[int, Field(ge=1, le=20)]] = Field(default_factory=dict)
    #: sha256 of the adapter's Cedar call policy (``adapters/<id>.cedar``; see baton.gateway.cedar_policy).
    call_policy_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)

    @field_validator(
        "allowed", "denied", "approval_required", "allow_destructive_without_approval", "step_up"
    )
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("tool names repeat")
        for name in value:
            if not re.fullmatch(TOOL_NAME_PATTERN, name):
                raise ValueError(f"tool name {name!r} is malformed")
        return value


class Resolution(_Strict):
    """How lock resolved the closure (its resolver's output, hashed) and what the operator accepted."""

    #: Packages accepted to run without the install script they declare (it never runs).
    allow_without_install_scripts: list[str] = Field(default_factory=list, max_length=256)
    #: The operator's narrowing of the resolver's choice (``mcp<2``, ``content-type@^1``); see
    #: :mod:`baton.gateway.constraints`.
    constraints: list[
        Annotated[str, StringConstraints(pattern=CONSTRAINT_PATTERN, max_length=MAX_CONSTRAINT_LENGTH)]
    ] = Field(default_factory=list, max_length=MAX_CONSTRAINTS)
    #: sha256 of the bundle's package-lock.json (npm) / requirements.txt with hashes (PyPI).
    npm_lockfile_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    pypi_requirements_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    #: Optional packages of the lockfile that do not install on this platform (npm skips them too).
    skipped_optional: list[str] = Field(default_factory=list, max_length=4096)

    @field_validator("allow_without_install_scripts")
    @classmethod
    def _package_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(PACKAGE_NAME_PATTERN, name):
                raise ValueError(f"package name {name!r} is malformed")
        return value


class Interpreter(_Strict):
    """The host interpreter the sandbox runs the server with, as lock found it."""

    kind: Literal["node", "python"]
    command: str = Field(min_length=1, max_length=256)
    path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    version: str = Field(min_length=1, max_length=64)
    sha256: str = Field(pattern=SHA256_PATTERN)


class HostProgram(_Strict):
    """A declared host program as replay found it: the declared path, its real path and its sha256."""

    path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    real_path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    sha256: str = Field(pattern=SHA256_PATTERN)


class Policy(_Strict):
    """One adapter policy file."""

    adapter: Identity
    artifacts: list[Artifact] = Field(min_length=1, max_length=4096)
    runtime: RuntimeSpec
    client: ClientSpec = Field(default_factory=ClientSpec)
    contract: Contract | None = None
    tools: Tools = Field(default_factory=Tools)
    resolution: Resolution = Field(default_factory=Resolution)
    interpreter: Interpreter | None = None
    host_programs: list[HostProgram] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        keys = [(a.ecosystem, a.name, a.version) for a in self.artifacts]
        if len(set(keys)) != len(keys):
            raise ValueError("an artifact is listed twice")
        if any(a.ecosystem == "pypi" and (a.sha256 is None or a.filename is None) for a in self.artifacts):
            raise ValueError("pypi artifacts need the wheel filename and the registry's sha256")
        if not set(self.tools.approval_required) <= set(self.tools.allowed):
            raise ValueError("approval_required names a tool that is not allowed")
        if not set(self.tools.required_approvals) | set(self.tools.step_up) <= set(
            self.tools.approval_required
        ):
            raise ValueError("required_approvals or step_up names a tool that is not in approval_required")
        if (self.runtime.network == "allowlist") != bool(self.runtime.allowed_origins):
            raise ValueError("network='allowlist' needs allowed_origins, and only it takes them")
        if self.runtime.sandbox == "docker" and self.runtime.image is None:
            raise ValueError("the docker sandbox needs an image pinned by digest")
        pinned = [pin.path for pin in self.host_programs]
        if len(set(pinned)) != len(pinned) or not set(pinned) <= set(self.runtime.host_programs):
            raise ValueError(
                "host_programs pins a program twice or one runtime.host_programs does not declare"
            )
        return self

    @property
    def id(self) -> str:
        """The adapter id."""
        return self.adapter.id

    def artifact_set_sha256(self) -> str:
        """sha256 of the canonical artifact set, the link between a policy and its lock receipt."""
        return artifact_set_sha256([a.model_dump(exclude_none=True) for a in self.artifacts])


def artifact_set_sha256(rows: list[dict[str, Any]]) -> str:
    """sha256 of the canonical JSON of artifact rows sorted by ecosystem and name."""
    return sha256_hex(canonical_json(sorted(rows, key=lambda r: (r["ecosystem"], r["name"]))))
