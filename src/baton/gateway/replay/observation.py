"""One run of a verified server in its sandbox: the settings its policy asks for, the MCP exchange, what it saw.

Replay observes through it, and a live adapter's upstream starts in the same sandbox settings.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy.contract import DEFINITION_FIELDS, ToolContract, tool_contract
from baton.gateway.policy.policy import Policy
from baton.gateway.replay.extract import Extracted, materialize
from baton.gateway.replay.protocol import JsonRpcPipe, Session, exchange, shut_down, stop
from baton.gateway.sandbox import scratch
from baton.gateway.sandbox.sandbox import Sandbox, sandbox_for
from baton.gateway.sandbox.sandbox_spec import HostMount, SandboxSpec
from baton.gateway.sandbox.stderr import HEADLINE_SCAN_BYTES, StderrTail, drain_in_thread, headline

STDERR_TAIL_BYTES = 2048


@dataclass(frozen=True)
class Observation:
    """One replay's view of the server."""

    server: dict[str, str]
    server_capabilities: dict[str, Any]
    tools: ToolContract
    definitions: list[dict[str, Any]]
    session: Session
    sandbox: str
    sandbox_removed: bool
    #: name → ``execution`` (taskSupport) of the tools that declare one; promote reads it.
    tool_execution: dict[str, Any]


def host_references(policy: Policy) -> dict[str, str]:
    """The values of the host variables the policy passes by reference, read now; unset is refused."""
    values = {}
    for name, host in policy.runtime.env_from_host.items():
        value = os.environ.get(host)
        if value is None:
            raise GatewayError(
                "adapter_env_unset",
                f"The policy passes {name} from the host variable {host}, which is not set for baton.",
                name=name,
                host_variable=host,
            )
        values[name] = value
    return values


def sandbox_spec(
    policy: Policy,
    workdir: Path,
    extra_env: dict[str, str] | None = None,
    mounts: tuple[HostMount, ...] = (),
) -> SandboxSpec:
    """The sandbox settings a policy asks for."""
    runtime = policy.runtime
    python = (
        {"PYTHONPATH": "/work/site-packages"} if any(a.ecosystem == "pypi" for a in policy.artifacts) else {}
    )
    return SandboxSpec(
        workdir=workdir,
        argv=[*runtime.entrypoint, *runtime.arguments],
        env={**python, **runtime.env, **host_references(policy), **(extra_env or {})},
        memory_bytes=runtime.memory_bytes(),
        memory_limit=runtime.memory_limit,
        pids_limit=runtime.pids_limit,
        cpu_seconds=runtime.cpu_seconds,
        cpu_limit=runtime.cpu_limit,
        tmpfs=runtime.tmpfs,
        shutdown_timeout_seconds=runtime.shutdown_timeout_seconds,
        image=runtime.image,
        platform=runtime.platform,
        mounts=mounts,
    )


def observe(policy: Policy, sandbox: Sandbox, spec: SandboxSpec, session: Session) -> Observation:
    """Start the server, run the exchange, shut it down; the session records how it ended."""
    timeout = policy.runtime.startup_timeout_seconds
    tail = StderrTail()
    process = sandbox.start(spec, stderr=subprocess.PIPE)
    assert process.stderr is not None
    drainer = drain_in_thread(process.stderr, tail)
    try:
        pipe = JsonRpcPipe(process, policy.client, session)
        server, tools, capabilities = exchange(pipe, timeout)
        shut_down(process, session, policy.runtime.shutdown_timeout_seconds)
    finally:
        stop(process, session, policy.runtime.shutdown_timeout_seconds)
        removed = sandbox.cleanup(process)
        drainer.join(timeout=policy.runtime.shutdown_timeout_seconds)
        session.stderr_tail = tail.tail(STDERR_TAIL_BYTES).decode("utf-8", errors="replace")
        session.stderr = tail.summary()
        session.stderr_headline = headline(tail.tail(HEADLINE_SCAN_BYTES).decode("utf-8", errors="replace"))
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None and not stream.closed:
                stream.close()
    contract = tool_contract(tools)
    definitions = sorted(
        ({key: tool[key] for key in DEFINITION_FIELDS if key in tool} for tool in tools),
        key=lambda tool: str(tool["name"]),
    )
    execution = {
        str(tool["name"]): tool["execution"] for tool in tools if isinstance(tool.get("execution"), dict)
    }
    return Observation(server, capabilities, contract, definitions, session, sandbox.name, removed, execution)


def run_in_sandbox(
    policy: Policy, bundle: Path, session: Session, mounts: tuple[HostMount, ...] = ()
) -> tuple[Observation, Extracted]:
    """Materialize the bundle in a fresh world-readable directory and observe the server once."""
    scratch.sweep()
    root = scratch.make("replay")
    try:
        extracted = materialize(policy, bundle, root)
        sandbox = sandbox_for(policy.runtime.sandbox)
        return observe(policy, sandbox, sandbox_spec(policy, root, mounts=mounts), session), extracted
    finally:
        scratch.remove(root)
