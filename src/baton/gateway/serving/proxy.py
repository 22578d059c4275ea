"""The proxy: every live adapter's allowed tools as ``{adapter_id}__{tool}``, deny by default.

An adapter whose policy says ``[serving] unprefixed = true`` is served under its tools' own names while
no other tool has one of them (:mod:`~baton.gateway.serving.names`); its prefixed names still answer.

Listing reads the pinned schemas from the policy's replay receipt (no upstream starts); a call goes
through the policy (denied → ``tool_denied``), an approval when the tool needs one
(:mod:`~baton.gateway.serving.call_approval`), then the upstream (:class:`~baton.gateway.serving.upstream.Upstream`),
and always ends in a ``gateway_call`` receipt. A governed subagent's tool call takes the same
:meth:`GatewayProxy.call` (through the same ``ToolRegistry.call``); its ``CallContext.on_behalf`` names
the subagent in the approval request and links the receipt to the spawn and to the model call that asked.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from baton.boundary.toolkit import CallContext, DynamicTools, ToolRegistry
from baton.errors import BatonError, GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy import snapshot as serving
from baton.gateway.policy import state
from baton.gateway.policy.cedar_policy import CallDecision, check_call
from baton.gateway.policy.paths import canonical_arguments
from baton.gateway.policy.snapshot import LiveAdapter
from baton.gateway.serving import call_approval, delegated, promotion
from baton.gateway.serving.names import SEPARATOR, Routes, block_view, served_name, taken_in
from baton.runtime import Runtime

log = logging.getLogger("baton.gateway")


@dataclass(slots=True)
class _Trail:
    """What one call's ``gateway_call`` receipt records, filled in as the call goes."""

    #: ``success`` and ``error_class``; empty until the call ends (an escape is ``internal_error``).
    outcome: dict[str, Any] = field(default_factory=dict)
    approval: dict[str, Any] | None = None
    #: The pinned call policy's verdict (None when the adapter pins none).
    verdict: dict[str, Any] | None = None


class Adapter:
    """One live adapter: its policy, its pinned tool definitions and its upstream."""

    def __init__(self, runtime: Runtime, live: LiveAdapter, proxy: GatewayProxy) -> None:
        self.policy = live.policy
        self.row = live.row
        self.id = live.policy.id
        from baton.gateway.serving.upstream import Upstream  # the SDK client and the sandbox: only when live

        self.definitions = pinned_definitions(runtime, live)
        self.bundle_root = live.bundle.parent
        self.upstream = Upstream(
            runtime, live.policy, lambda error, evidence: proxy.block(self, error, evidence), live.bundle
        )
        self.block: GatewayError | None = None
        if live.row.get("serving_block_reason"):
            self.block = GatewayError(
                live.row.get("serving_error_class") or "adapter_blocked",
                f"Adapter {self.id} is blocked: {live.row.get('serving_block_reason')}. "
                "Re-lock, replay and promote it.",
                adapter_id=self.id,
            )


def pinned_definitions(runtime: Runtime, live: LiveAdapter) -> dict[str, dict[str, Any]]:
    """The allowed tools' definitions as the replay recorded them (name → definition)."""
    receipt = state.replay_receipt(runtime, live.policy.id, live.row["serving_replay_receipt_sha256"] or "")
    listed = (receipt or {}).get("tool_definitions") or []
    allowed = set(live.policy.tools.allowed)
    return {tool["name"]: tool for tool in listed if tool.get("name") in allowed}


class GatewayProxy(DynamicTools):
    """The registry's dynamic tool source for live adapters (its ``gateway_call`` receipt replaces ``tool_call``)."""

    writes_receipts = True

    def __init__(self, runtime: Runtime, registry: ToolRegistry | None = None) -> None:
        self.runtime = runtime
        self.registry = registry
        self.adapters: dict[str, Adapter] = {}
        self._routes: Routes | None = None
        self._suspects: dict[str, GatewayError] | None = None
        self.group: TaskGroup | None = None
        self._ready = anyio.Event()
        self._consumed: set[str] = set()
        self._retired: list[Adapter] = []
        self.load()

    def load(self) -> None:
        """(Re)read the live adapters from the store (and sweep what dead baton processes left behind)."""
        from baton.gateway.sandbox import scratch

        scratch.sweep()
        self.adapters = {
            live.policy.id: Adapter(self.runtime, live, self) for live in serving.live_adapters(self.runtime)
        }
        self._routes = self._suspects = None

    def suspects(self) -> dict[str, GatewayError]:
        """The live adapters refused for a shadowing finding nobody accepted (checked on first use after
        each start, :mod:`~baton.gateway.serving.shadowing`)."""
        if self._suspects is None:
            from baton.gateway.serving.shadowing import refused_at_start

            self._suspects = refused_at_start(self.runtime, self.adapters.values())
        return self._suspects

    def routes(self) -> Routes:
        """The unprefixed names and the adapters refused for a collision (built on first use, when the
        registry holds every other tool)."""
        if self._routes is None:
            self._routes = Routes(self.adapters.values(), taken_in(self.registry, self))
            for adapter_id, error in self._routes.refused.items():
                log.warning("adapter %s: %s", adapter_id, error.message)
        return self._routes

    async def run(self) -> None:
        """The server-lifetime task group the upstreams run in; stops them all on shutdown."""
        try:
            async with anyio.create_task_group() as group:
                self.group = group
                self._ready.set()
                self.suspects()  # the shadowing check of this start: reported before any call asks
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                for adapter in [*self.adapters.values(), *self._retired]:
                    await adapter.upstream.close()

    def split(self, name: str) -> tuple[Adapter, str] | None:
        """``(adapter, tool)`` for a proxied name (an unprefixed adapter's own tool name, or any name under a
        live adapter's prefix), or None when it is neither."""
        routes = self.routes()
        bare = routes.allowed.get(name)
        if bare is not None:
            return self.adapters[bare[0].id], bare[1]
        adapter_id, sep, tool = name.partition(SEPARATOR)
        adapter = self.adapters.get(adapter_id)
        if sep and adapter is not None and tool:
            return adapter, tool
        denied = routes.denied.get(name)
        return (self.adapters[denied[0].id], denied[1]) if denied is not None else None

    def adapter_of(self, name: str) -> str | None:
        """The id of the adapter that serves ``name`` (the metrics' adapter label)."""
        split = self.split(name)
        return split[0].id if split is not None else None

    def owns(self, name: str) -> bool:
        """Every name under a live adapter's prefix, and an unprefixed adapter's allowed and denied names,
        so denied names get ``tool_denied``."""
        return self.split(name) is not None

    def knows(self, name: str) -> bool:
        """Whether ``name`` is an allowed or denied tool of a live adapter's policy (not any suffix)."""
        split = self.split(name)
        if split is None:
            return False
        adapter, tool = split
        return tool in adapter.policy.tools.allowed or tool in adapter.policy.tools.denied

    async def list_tools(self) -> list[dict[str, Any]]:
        """Only allowed tools, with the upstream's pinned schemas."""
        tools = []
        for adapter in list(self.adapters.values()):
            adapter, live = self.current(adapter)
            if not live or adapter.id in self.routes().refused or adapter.id in self.suspects():
                continue
            for name, definition in sorted(adapter.definitions.items()):
                listed = {
                    k: v
                    for k, v in definition.items()
                    if k in ("title", "description", "inputSchema", "outputSchema", "annotations")
                }
                listed.pop("outputSchema", None)  # results are wrapped in baton's envelope
                tools.append({**listed, "name": served_name(adapter.policy, name)})
        return tools

    def block(self, adapter: Adapter, error: GatewayError, evidence: dict[str, Any]) -> None:
        """Drift seen at an upstream start: block the adapter in memory and in the store."""
        adapter.block = error
        promotion.block_at_runtime(
            self.runtime, adapter.id, error, evidence, adapter.row.get("serving_policy_checksum")
        )

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """Policy, approval, upstream; one ``gateway_call`` receipt whatever happens."""
        split = self.split(name)
        assert split is not None
        adapter, tool = split
        adapter, live = self.current(adapter)
        started = time.perf_counter()
        serialized = canonical_json(arguments)
        frozen: dict[str, Any] = json.loads(serialized)  # canonical_json(frozen) == serialized
        trail = _Trail()
        try:
            self._admit(adapter, tool, live)
            judged = canonical_arguments(frozen, adapter.policy.runtime.mounts)  # judged is what is sent
            frozen, serialized = judged.arguments, canonical_json(judged.arguments)
            definition = adapter.definitions[tool]
            delegated.check(adapter.id, definition, tool, frozen, context.on_behalf, judged.path_escapes)
            decision = self._decide(adapter, tool, frozen, context, trail, judged.path_escapes)
            if tool in adapter.policy.tools.approval_required or decision.effect == "approval":
                escapes = judged.path_escapes
                trail.approval = await self._approval(adapter, tool, frozen, context, decision, escapes)
            result = await self._forward(adapter, tool, frozen, context)
            trail.outcome = {"success": result["success"], "error_class": result.get("error_class")}
            return {**result, **({"approval": trail.approval} if trail.approval else {})}
        except BatonError as exc:
            trail.outcome = {"success": False, "error_class": exc.error_class}
            if trail.approval:
                exc.details.setdefault("approval", trail.approval)
            elif isinstance(exc.details.get("approval"), dict):  # a rejection: receipt the decision too
                trail.approval = exc.details["approval"]
            raise
        finally:
            seconds = time.perf_counter() - started
            self._receipt(adapter, tool, frozen, sha256_hex(serialized), seconds, trail, context)

    async def _approval(
        self,
        adapter: Adapter,
        tool: str,
        frozen: dict[str, Any],
        context: CallContext,
        decision: CallDecision,
        path_escapes: bool,
    ) -> dict[str, Any]:
        """A person's standing grant that covers the call, else a person's approval of this one call."""
        grant = call_approval.granted(
            self.runtime, adapter, tool, frozen, context, decision.approvals, path_escapes
        )
        if grant is not None:
            return grant
        approval = await call_approval.approve(
            self.runtime,
            self._consumed,
            adapter,
            tool,
            served_name(adapter.policy, tool),
            frozen,
            context,
            decision.approvals,
        )
        call_approval.still_valid(self.runtime, approval, frozen, context)
        return approval

    @staticmethod
    def _decide(
        adapter: Adapter,
        tool: str,
        arguments: dict[str, Any],
        context: CallContext,
        trail: _Trail,
        path_escapes: bool,
    ) -> CallDecision:
        """The adapter's call policy on this call; its verdict goes on the trail (a forbid or an error
        too, before it is raised) when the adapter pins a policy."""
        try:
            decision = check_call(
                adapter.policy, adapter.bundle_root, tool, arguments, context.agent.name, path_escapes
            )
        except GatewayError as exc:
            effect = "forbid" if exc.error_class == "gateway_policy_forbidden" else "error"
            trail.verdict = {
                "effect": effect,
                "approvals": 0,
                "reasons": list(exc.details.get("reasons") or []),
            }
            raise
        if adapter.policy.tools.call_policy_sha256 is not None:
            trail.verdict = {
                "effect": decision.effect,
                "approvals": decision.approvals,
                "reasons": decision.reasons,
            }
        return decision

    def current(self, adapter: Adapter) -> tuple[Adapter, bool]:
        """The adapter as the store serves it now, and whether it is live (one store read).

        A version promoted since this server loaded the adapter replaces it; the old upstream is stopped
        once calls already running on it have had their time.
        """
        row = state.liveness_now(self.runtime, adapter.id)
        served = row.get("serving_policy_checksum") if row else None
        if served is None or served == adapter.row.get("serving_policy_checksum"):
            return adapter, served is not None
        stored = state.get_adapter(self.runtime, adapter.id)
        try:
            fresh = Adapter(self.runtime, serving.load_live(self.runtime, stored or {}), self)
        except (GatewayError, KeyError):
            return adapter, False  # _admit refuses the stale one with adapter_not_promoted
        log.info("adapter %s: serving the version promoted as %s", adapter.id, served)
        self.adapters[adapter.id] = fresh
        self._routes = self._suspects = None  # the new version may name its tools differently
        self._retire(adapter)
        return fresh, True

    def _retire(self, adapter: Adapter) -> None:
        self._retired.append(adapter)
        grace = adapter.policy.runtime.call_timeout_seconds + 5

        async def close_later() -> None:
            await anyio.sleep(grace)
            await adapter.upstream.close()
            self._retired.remove(adapter)

        if self.group is not None:
            self.group.start_soon(close_later)

    def _admit(self, adapter: Adapter, tool: str, live: bool) -> None:
        if not live:
            raise GatewayError(
                "adapter_not_promoted",
                f"Adapter {adapter.id} is no longer promoted (it was demoted, or the version promoted since "
                "does not load; see mcp_list_adapters).",
                adapter_id=adapter.id,
            )
        if tool not in adapter.policy.tools.allowed or tool not in adapter.definitions:
            raise GatewayError(
                "tool_denied",
                f"The policy of adapter {adapter.id} does not allow {tool!r}.",
                adapter_id=adapter.id,
            )
        if adapter.block is not None:
            raise GatewayError(
                adapter.block.error_class, adapter.block.message, adapter_id=adapter.id, blocked=True
            )
        refused = self.routes().refused.get(adapter.id) or self.suspects().get(adapter.id)
        if refused is not None:
            raise GatewayError(refused.error_class, refused.message, **refused.details)

    async def _forward(
        self, adapter: Adapter, tool: str, arguments: dict[str, Any], context: CallContext
    ) -> dict[str, Any]:
        if not self._ready.is_set():  # (waiting on a set event still yields to the loop once)
            await self._ready.wait()
        assert self.group is not None

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await context.progress(value, total, message)

        # the upstream is asked for progress only when baton's own caller asked for it
        result = await adapter.upstream.call(
            self.group, tool, arguments, progress if context.progress.wanted else None
        )
        return envelope(adapter.id, tool, result)

    def _receipt(
        self,
        adapter: Adapter,
        tool: str,
        arguments: dict[str, Any],
        arguments_sha256: str,
        seconds: float,
        trail: _Trail,
        context: CallContext,
    ) -> None:
        outcome = trail.outcome
        payload: dict[str, Any] = {
            "adapter_id": adapter.id,
            "tool": tool,
            "arguments_sha256": arguments_sha256,
            "duration_seconds": round(seconds, 6),
            "success": bool(outcome.get("success")),
            "error_class": outcome.get("error_class", "internal_error" if not outcome else None),
            "approval": trail.approval,
            "agent": context.agent.name,
            "call_policy_sha256": adapter.policy.tools.call_policy_sha256,
            "call_policy_decision": trail.verdict,
            # the adapter policy version that admitted (or refused) the call, kept by its checksum for replay
            "policy_checksum": adapter.row.get("serving_policy_checksum"),
        }
        # a Cedar verdict depends on the arguments: they are recorded (redacted) so replay can re-derive it
        if adapter.policy.tools.record_arguments or adapter.policy.tools.call_policy_sha256 is not None:
            payload["arguments"] = arguments
        if context.on_behalf is not None:
            payload["subagent"] = context.on_behalf.link()
        try:
            self.runtime.receipts.append("gateway_call", payload)
        except BatonError:
            log.exception("gateway-call receipt refused")

    def view(self) -> list[dict[str, Any]]:
        """What ``mcp_list_adapters`` reports for the live adapters (the rest comes from the store)."""
        refused = {**self.suspects(), **self.routes().refused}
        return [
            {
                "adapter_id": adapter.id,
                "live": True,
                **block_view(adapter.block or refused.get(adapter.id)),
                "upstream_running": adapter.upstream.running(),
                "upstream_starts": adapter.upstream.starts,
                "upstream_restarts": adapter.upstream.restarts,
                **adapter.upstream.stderr,
                "tools": sorted(served_name(adapter.policy, name) for name in adapter.definitions),
                "unprefixed": adapter.policy.serving.unprefixed,
                "approval_required": sorted(adapter.policy.tools.approval_required),
                "network": adapter.policy.runtime.network,
                "allowed_origins": list(adapter.policy.runtime.allowed_origins),
            }
            for adapter in self.adapters.values()
        ]


def envelope(adapter_id: str, tool: str, result: Any) -> dict[str, Any]:
    """baton's result for an upstream CallToolResult; the upstream's own content blocks go in ``mcp_content``."""
    content = [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in result.content]
    text = "\n".join(block["text"] for block in content if block.get("type") == "text")
    value: dict[str, Any] = {
        "success": not result.is_error,
        "adapter_id": adapter_id,
        "tool": tool,
        "text": text,
        "mcp_content": content,
    }
    if result.structured_content is not None:
        value["structured_content"] = result.structured_content
    if result.is_error:
        value.update(error_class="mcp_upstream_tool_error", error=text[:2000] or "The upstream tool failed.")
    return value
