"""Policy files: reading, parsing and atomically writing an adapter's policy TOML, and where policies live."""

from __future__ import annotations

import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton import clock
from baton.config import Settings
from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy.policy import ADAPTER_ID_PATTERN, Policy, Serving

#: Isolation settings a policy must state exactly; anything else is a weakened sandbox.
REQUIRED_ISOLATION: dict[str, Any] = {
    "read_only_root": True,
    "no_new_privileges": True,
    "cap_drop": ["ALL"],
    "user": "65534:65534",
}


def validation_failure(exc: ValidationError, subject: str, at: str = "") -> GatewayError:
    """``adapter_policy_invalid`` for a policy (or the part of one under ``at``, e.g. ``runtime.``) that
    fails validation, naming the first failing field."""
    first = exc.errors()[0]
    where = at + ".".join(str(part) for part in first["loc"])
    return GatewayError(
        "adapter_policy_invalid",
        f"{subject} fails validation at {where or 'the top level'}: {first['msg']}.",
        field=where,
    )


def parse_policy(raw: dict[str, Any], *, now: datetime | None = None, check_expiry: bool = True) -> Policy:
    """Validate a policy document; raises the most specific error class for the first failure."""
    runtime = raw.get("runtime")
    if isinstance(runtime, dict):
        if runtime.get("network", "none") not in ("none", "allowlist"):
            raise GatewayError(
                "adapter_isolation_weakened",
                f"The policy sets runtime.network to {runtime['network']!r}; only 'none' or 'allowlist'.",
                field="runtime.network",
            )
        for field, required in REQUIRED_ISOLATION.items():
            if field in runtime and runtime[field] != required:
                raise GatewayError(
                    "adapter_isolation_weakened",
                    f"The policy sets runtime.{field} to {runtime[field]!r}; only {required!r} is allowed.",
                    field=f"runtime.{field}",
                )
    tools = raw.get("tools")
    if isinstance(tools, dict):
        overlap = set(tools.get("allowed") or []) & set(tools.get("denied") or [])
        if overlap:
            raise GatewayError(
                "adapter_tool_overlap",
                f"Tools are both allowed and denied: {', '.join(sorted(overlap))}.",
                tools=sorted(overlap),
            )
    try:
        policy = Policy.model_validate(raw)
    except ValidationError as exc:
        raise validation_failure(exc, "The adapter policy") from None
    if check_expiry and policy.adapter.expires() <= (now or clock.now()):
        raise GatewayError(
            "adapter_policy_expired",
            f"The policy of adapter {policy.id} expired at {policy.adapter.expires_at}.",
            adapter_id=policy.id,
        )
    return policy


def read_policy_document(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed TOML and its checksum (sha256 of the canonical JSON of the document)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GatewayError("adapter_not_found", f"No adapter policy at {path}.", path=str(path)) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise GatewayError(
            "adapter_policy_invalid", f"The adapter policy {path.name} is not readable TOML: {exc}."
        ) from None
    try:
        checksum = "sha256:" + sha256_hex(canonical_json(raw))
    except TypeError:
        raise GatewayError(
            "adapter_policy_invalid", "The policy holds TOML dates; quote expires_at as a string."
        ) from None
    return raw, checksum


def load_policy(path: Path, *, now: datetime | None = None, check_expiry: bool = True) -> tuple[Policy, str]:
    """Read and validate a policy file; returns the policy and its checksum."""
    raw, checksum = read_policy_document(path)
    return parse_policy(raw, now=now, check_expiry=check_expiry), checksum


def adapters_dir(settings: Settings) -> Path:
    """``BATON_HOME/adapters``, where policies live by default."""
    return settings.home / "adapters"


def policy_path(settings: Settings, adapter: str) -> Path:
    """The policy file for an adapter id, or ``adapter`` itself when it names a file."""
    if adapter.endswith(".toml") or "/" in adapter:
        return Path(adapter).expanduser().resolve()
    if not re.fullmatch(ADAPTER_ID_PATTERN, adapter):
        raise GatewayError("adapter_not_found", f"{adapter!r} is neither an adapter id nor a policy path.")
    return adapters_dir(settings) / f"{adapter}.toml"


def dump_policy(policy: Policy) -> str:
    """The policy as TOML text."""
    import tomli_w

    data = policy.model_dump(exclude_none=True)
    if not data["host_programs"]:  # absent rather than empty: policies written before them keep their bytes
        del data["host_programs"]
    if not data["runtime"]["host_programs"]:
        del data["runtime"]["host_programs"]
    if data["serving"] == Serving().model_dump():  # absent by default, for the same reason
        del data["serving"]
    return tomli_w.dumps(data)


def write_policy(path: Path, policy: Policy) -> str:
    """Write a policy file atomically; returns its checksum."""
    from baton.store.private import private_dir, write_private

    if not path.parent.is_dir():
        private_dir(path.parent)
    text = dump_policy(policy)
    tmp = path.with_suffix(".toml.tmp")
    write_private(tmp, text.encode("utf-8"))  # a policy may carry --env values: 0600
    tmp.replace(path)
    return "sha256:" + sha256_hex(canonical_json(tomllib.loads(text)))
