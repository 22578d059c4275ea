"""Make a live adapter of the test MCP server: publish, lock, verify, replay, pin, promote (tests, bench)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from baton.config import load_settings
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy import cedar_policy
from baton.gateway.policy.policy_files import load_policy, parse_policy, write_policy
from baton.gateway.replay.replay import replay
from baton.gateway.serving.promotion import promote
from baton.runtime import Runtime
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball

TEST_SERVER = "baton-test-mcp"


def tool(name: str, **properties: str) -> dict[str, Any]:
    """A tool definition whose arguments are the given ``name=json type`` properties."""
    schema = {"type": "object", "properties": {key: {"type": kind} for key, kind in properties.items()}}
    return {"name": name, "description": f"The test tool {name}.", "inputSchema": schema}


@contextmanager
def registry_runtime(home: str | Path, registry: NpmRegistryServer) -> Iterator[Runtime]:
    """A runtime on ``home`` that locks packages from ``registry``, closed on the way out: where a test makes
    its adapters live before it starts baton there."""
    runtime = Runtime.open(load_settings({"BATON_HOME": str(home), "BATON_NPM_REGISTRY": registry.url}))
    try:
        yield runtime
    finally:
        runtime.close()


def publish(registry: NpmRegistryServer) -> bytes:
    """Publish the test MCP server and return its tarball."""
    tarball = build_tarball(package_files())
    registry.publish(TEST_SERVER, "1.0.0", tarball, bin={TEST_SERVER: "server.py"})
    return tarball


def policy_document(
    adapter_id: str, tarball: bytes, *, tool_policy: dict[str, Any] | None = None, **runtime: Any
) -> dict[str, Any]:
    """A draft policy (no contract yet) that runs the test MCP server from ``tarball`` with python3."""
    return {
        "adapter": {
            "id": adapter_id,
            "candidate": f"npm:{TEST_SERVER}@1.0.0",
            "risk_class": "high",
            "owner": "tests",
            "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat(),
        },
        "artifacts": [
            {
                "ecosystem": "npm",
                "name": TEST_SERVER,
                "version": "1.0.0",
                "sha512": hashlib.sha512(tarball).hexdigest(),
            }
        ],
        "runtime": {
            "entrypoint": ["python3", f"node_modules/{TEST_SERVER}/server.py"],
            "startup_timeout_seconds": 15,
            "shutdown_timeout_seconds": 2,
            **runtime,
        },
        "tools": tool_policy or {},
    }


def document(adapter_id: str, tarball: bytes, tools: list[dict[str, Any]], **runtime: Any) -> dict[str, Any]:
    """A draft policy running the test server with ``tools``."""
    env = {"BATON_TEST_MCP_TOOLS": json.dumps(tools), **runtime.pop("env", {})}
    return policy_document(adapter_id, tarball, env=env, **runtime)


def make_live(runtime: Runtime, draft: dict[str, Any], *, allowed: list[str], **options: Any) -> Path:
    """Lock, verify, replay (pinning the contract), set the tools (and pin ``call_policy``, a Cedar
    policy text, as ``adapters/<id>.cedar``; serve them ``unprefixed``; ``step_up`` and
    ``required_approvals`` as the policy's own fields), replay again and promote.

    The suite runs several copies of one test server, whose tools share names: the
    ``name_shadows_adapter_tool`` findings that causes are accepted by id (any other finding refuses).
    """
    path, replayed = make_replayed(runtime, draft, allowed=allowed, **options)
    shadowing = [
        f["id"]
        for f in replayed.get("poisoning_findings") or []
        if f.get("kind") == "name_shadows_adapter_tool"
    ]
    promote(runtime, replayed["adapter_id"], accept_findings=shadowing)
    return path


def make_replayed(
    runtime: Runtime,
    draft: dict[str, Any],
    *,
    allowed: list[str],
    approval_required: list[str] | None = None,
    record_arguments: bool = False,
    approval_timeout_seconds: int | None = None,
    allow_destructive_without_approval: list[str] | None = None,
    call_policy: str | None = None,
    unprefixed: bool = False,
    step_up: list[str] | None = None,
    required_approvals: dict[str, int] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """:func:`make_live` up to its last replay (nothing promoted): the policy's path and that replay
    (``step_up`` and ``required_approvals`` set as the policy's own fields when given)."""
    policy = parse_policy(draft)
    path = runtime.settings.home / "adapters" / f"{policy.id}.toml"
    write_policy(path, policy)
    artifacts.lock(runtime, policy.id)
    stages.verify(runtime, policy.id)
    replay(runtime, policy.id, apply=True, record=True)
    pinned, _ = load_policy(path)
    names = set(pinned.tools.allowed + pinned.tools.denied)
    tools = pinned.tools.model_copy(
        update={
            "allowed": [name for name in allowed if name in names],
            "denied": sorted(names - set(allowed)),
            "approval_required": list(approval_required or []),
            "record_arguments": record_arguments,
            "approval_timeout_seconds": approval_timeout_seconds,
            "allow_destructive_without_approval": list(allow_destructive_without_approval or []),
            "step_up": pinned.tools.step_up if step_up is None else step_up,
            "required_approvals": pinned.tools.required_approvals
            if required_approvals is None
            else required_approvals,
            "call_policy_sha256": None if call_policy is None else cedar_policy.sha256_of(call_policy),
        }
    )
    if call_policy is not None:
        cedar_policy.policy_annotations(call_policy)  # refuses a policy that does not parse, as pin does
        cedar_policy.policy_file(path).write_text(call_policy, encoding="utf-8")
    serving = pinned.serving.model_copy(update={"unprefixed": unprefixed})
    write_policy(path, pinned.model_copy(update={"tools": tools, "serving": serving}))
    return path, replay(runtime, policy.id, apply=True)
