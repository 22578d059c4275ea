"""The tool boundary: typed tool specs, argument validation, error results and tool-call receipts.

This is the only layer that turns exceptions into ``{success: false, error, error_class}``; the
core modules raise :class:`~baton.errors.BatonError` and return plain dicts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.boundary.limits import check_arguments, check_tool_name
from baton.boundary.observe import observe_tool_call
from baton.errors import ArgumentError, BatonError, SubagentError, ToolNameError
from baton.evidence.canonical import canonical_json, sha256_hex
from baton.identity.agents import STDIO_FALLBACK, Caller

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from baton.runtime import Runtime
    from baton.store.engine import DriverTransaction

log = logging.getLogger("baton.tools")

ArgsT = TypeVar("ArgsT", bound=BaseModel)

#: Built-ins that only hand on a narrower delegation (a read-only subagent may still spawn: its subagents
#: inherit read_only).
DELEGATING = ("mcp_spawn_subagent",)


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are an error, not silently dropped; types are strict
    (``"30"`` or ``true`` is not an integer, ``1`` is not a boolean)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Progress:
    """Sends MCP progress notifications for the current call (a no-op when the client asked for none)."""

    def __init__(self, report: Callable[[float, float | None, str | None], Awaitable[None]] | None) -> None:
        self._report = report

    @property
    def wanted(self) -> bool:
        """Whether a report reaches anyone (a proxied call asks its upstream for progress only then)."""
        return self._report is not None

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; failures to deliver are logged, never raised into the tool."""
        if self._report is None:
            return
        try:
            await self._report(progress, total, message)
        except Exception:  # a client gone away must not fail the tool
            log.debug("progress notification not delivered", exc_info=True)


@dataclass
class OnBehalf:
    """A tool call a subagent's model asked for: who asked, and which receipts it links to."""

    subagent_id: str
    parent_agent: str
    #: seq and sha256 of the ``subagent_spawned`` receipt and of the ``model_call`` receipt that asked.
    spawn_receipt: dict[str, Any]
    model_call_receipt: dict[str, Any]
    #: Called with a human request's id when the call starts waiting on it (None: not waiting any more).
    waiting: Callable[[str | None], None] | None = None
    #: The subagent's delegation chain (:mod:`baton.delegation`), agent first, and the Cedar text of each
    #: argument predicate it holds, by sha256 (empty: a subagent stored before delegations were kept).
    delegation: list[dict[str, Any]] = field(default_factory=list)
    policies: dict[str, str] = field(default_factory=dict)

    def link(self) -> dict[str, Any]:
        """The ``subagent`` field of the call's receipt."""
        linked = {
            "subagent_id": self.subagent_id,
            "parent_agent": self.parent_agent,
            "spawn_receipt": self.spawn_receipt,
            "model_call_receipt": self.model_call_receipt,
        }
        return {**linked, "delegation": self.delegation} if self.delegation else linked

    def refusal(self, name: str, spec: ToolSpec[Any] | None) -> BatonError | None:
        """Why the subagent's delegation does not cover calling ``name`` (a built-in's ``spec``, None for an
        adapter's tool, whose annotations the gateway checks), or None: enforced here, not by the prompt."""
        if not self.delegation:
            return None
        last = self.delegation[-1]
        if last.get("tools") is not None and name not in last["tools"]:
            return SubagentError(
                "subagent_tool_not_allowed",
                f"Subagent {self.subagent_id} was not delegated {name}.",
                tool=name,
            )
        if last.get("read_only") and spec is not None and not (spec.read_only or name in DELEGATING):
            return SubagentError(
                "subagent_tool_not_allowed",
                f"Subagent {self.subagent_id} is read-only and {name} is not a read-only tool.",
                tool=name,
                read_only=True,
            )
        return None


@dataclass
class CallContext:
    """What a tool handler may use of the MCP request beyond its arguments."""

    progress: Progress = field(default_factory=lambda: Progress(None))
    client_capabilities: Any = None
    session: Any = None
    #: How this caller may decide human-in-the-loop requests (``mcp`` by opt-in, ``mcp_admin`` by the
    #: admin credential), or None: by default an MCP client may ask, never decide.
    decider: str | None = None
    #: The negotiated MCP protocol version (``2026-07-28`` has no back-channel: elicitation goes by MRTR).
    protocol_version: str | None = None
    #: A multi-round-trip retry's client answers (``inputResponses``) and verified ``requestState``.
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    #: When the call runs as an MCP task (``baton.tasks.store.TaskHandle``): what it waits on, what input
    #: it needs.
    task: Any = None
    #: The agent behind the call (:func:`baton.identity.agents.current_agent`); what it may see and act on.
    agent: Caller = field(default_factory=lambda: Caller(STDIO_FALLBACK))
    #: Whether the client declared MCP Apps, so an asking tool's result renders the request card in the chat.
    apps_card: bool = False
    #: The MCP client's ``clientInfo.name`` (:func:`baton.identity.agents.client_name`), shown to whoever decides.
    client: str | None = None
    #: When a subagent's model asked for the call (its receipts link to the spawn and the model call).
    on_behalf: OnBehalf | None = None
    #: Set by :meth:`ToolRegistry.call` for the handler: appends the call's ``tool_call`` receipt, as a
    #: success, inside the handler's own write transaction (see :meth:`ToolRegistry.call`).
    receipt_in: Callable[[Connection | DriverTransaction], None] | None = None


Handler = Callable[[ArgsT, CallContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec(Generic[ArgsT]):
    """One tool: its name, a description for the client, an arguments model and a handler."""

    name: str
    description: str
    args: type[ArgsT]
    handler: Handler[ArgsT]
    title: str | None = None
    read_only: bool = False
    #: Sends the client nothing but its result (no progress, elicitation or log line) and answers
    #: promptly: over HTTP its answer may be one JSON body instead of an SSE stream, which would carry
    #: keep-alive pings through a proxy during a long call (:mod:`baton.wire.json_answers`).
    quiet: bool = False

    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, as MCP clients see it (no Python titles or docstrings)."""
        from baton.boundary.json_schema import input_schema

        return input_schema(self.args)


@dataclass
class ToolRegistry:
    """Every tool the server exposes, plus background tasks subsystems start with the server."""

    runtime: Runtime
    tools: dict[str, ToolSpec[Any]] = field(default_factory=dict)
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    dynamic: list[DynamicTools] = field(default_factory=list)
    #: Set by the transport once its start-up answers (the handshake, the first ``tools/list``) are written:
    #: deferred start-up work (the model stack's warm-up) waits on it, so it never takes the GIL from them.
    start_up_answered: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, spec: ToolSpec[Any]) -> None:
        """Register a tool; a duplicate name is a programming error."""
        if spec.name in self.tools:
            raise ValueError(f"tool {spec.name!r} registered twice")
        self.tools[spec.name] = spec

    def tool(
        self,
        name: str,
        args: type[ArgsT],
        *,
        title: str | None = None,
        read_only: bool = False,
        quiet: bool = False,
    ) -> Callable[[Handler[ArgsT]], Handler[ArgsT]]:
        """Decorator form of :meth:`add`; the handler's docstring is the tool's description."""

        def register(handler: Handler[ArgsT]) -> Handler[ArgsT]:
            description = (handler.__doc__ or name).strip()
            self.add(ToolSpec(name, description, args, handler, title, read_only, quiet))
            return handler

        return register

    def quiet(self, name: str) -> bool:
        """Whether ``name`` is a built-in tool that sends the client nothing but its result."""
        spec = self.tools.get(name)
        return spec is not None and spec.quiet

    def on_start(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the server's task group for the server's lifetime."""
        self.background.append(task)

    async def call(self, name: str, arguments: dict[str, Any] | None, context: CallContext) -> dict[str, Any]:
        """Validate, run and receipt one tool call; never raises for a tool's own failure.

        A name over the cap raises :class:`ToolNameError` before anything is stored or counted; an unknown
        name is receipted and counted (as ``unknown``), then raised as :class:`ToolNameError` too: the
        server answers both as JSON-RPC errors. The argument cap comes first, whatever the name.

        A handler whose success is settled by its own last write transaction (an async spawn) may call
        ``context.receipt_in(transaction)`` in it: the success receipt then commits with the state it
        records, in that transaction, instead of in one more after it. If the call does not end in that
        success, the receipt is written here as for any call.
        """
        check_tool_name(name)
        started = time.perf_counter()
        arguments = arguments or {}
        owner = None if name in self.tools else self._owner(name)
        written: list[bool] = []
        try:
            check_arguments(arguments, self.runtime.settings.baton_max_argument_bytes)
        except ArgumentError as exc:
            raw, oversized = exc.to_result(), True
        else:
            if owner is None:

                def receipt_in(connection: Connection | DriverTransaction) -> None:
                    seconds = time.perf_counter() - started
                    payload = self._payload(name, arguments, {"success": True}, seconds, context)
                    try:
                        self.runtime.receipts.append_in(connection, "tool_call", payload)
                    except (
                        BatonError
                    ):  # refused by the guard before any write: refused again, and logged, below
                        return
                    written.append(True)

                context.receipt_in = receipt_in
            try:
                raw, oversized = await self._dispatch(name, owner, arguments, context), False
            finally:
                context.receipt_in = None
        result: dict[str, Any] = self.runtime.redactor.value(raw)
        seconds = time.perf_counter() - started
        # a receipt written in the handler's transaction says "success": it stands only if that is the outcome
        settled = bool(written) and result.get("success") is True and result.get("error_class") is None
        settled = settled and not result.get("input_required")
        if not settled and (owner is None or not owner.writes_receipts):
            await self._receipt(name, None if oversized else arguments, result, seconds, context)
        adapter = owner.adapter_of(name) if owner is not None else None
        observe_tool_call(self.metric_label(name, owner), result, seconds, adapter)
        if result.get("error_class") == "unknown_tool" and owner is None and name not in self.tools:
            raise ToolNameError("unknown_tool", result["error"])
        return result

    def _owner(self, name: str) -> DynamicTools | None:
        return next((source for source in self.dynamic if source.owns(name)), None)

    def metric_label(self, name: str, owner: DynamicTools | None) -> str:
        """``name`` when this server serves (or has pinned) that tool, else ``unknown``: bounded labels."""
        if name in self.tools or (owner is not None and owner.knows(name)):
            return name
        return "unknown"

    async def _dispatch(
        self, name: str, owner: DynamicTools | None, arguments: dict[str, Any], context: CallContext
    ) -> dict[str, Any]:
        spec = self.tools.get(name)
        refused = context.on_behalf.refusal(name, spec) if context.on_behalf is not None else None
        if refused is not None:
            return refused.to_result()
        if spec is None:
            if owner is not None:
                return await _guarded(lambda: owner.call(name, arguments, context))
            return BatonError("unknown_tool", f"No tool is named {name!r}.").to_result()
        try:
            args = spec.args.model_validate(arguments)
        except ValidationError as exc:
            return invalid_arguments(exc).to_result()
        return await _guarded(lambda: spec.handler(args, context))

    async def _receipt(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        result: dict[str, Any],
        seconds: float,
        context: CallContext,
    ) -> None:
        """Append the ``tool_call`` receipt (arguments refused as too large are not hashed: None); the answer
        waits until it is committed (grouped with concurrent calls' receipts over HTTP: ``append_soon``)."""
        payload = self._payload(name, arguments, result, seconds, context)
        try:
            await self.runtime.receipts.append_soon("tool_call", payload)
        except BatonError:
            log.exception("tool-call receipt refused")

    @staticmethod
    def _payload(
        name: str,
        arguments: dict[str, Any] | None,
        result: dict[str, Any],
        seconds: float,
        context: CallContext,
    ) -> dict[str, Any]:
        """The ``tool_call`` receipt's payload."""
        payload = {
            "tool": name,
            "agent": context.agent.name,
            "arguments_sha256": None if arguments is None else sha256_hex(canonical_json(arguments)),
            "success": bool(result.get("success")),
            "error_class": result.get("error_class"),
            "duration_seconds": round(seconds, 6),
        }
        if result.get("input_required"):  # the first leg of a multi-round-trip call: nothing decided yet
            payload["input_required"] = True
        if context.on_behalf is not None:
            payload["subagent"] = context.on_behalf.link()
        return payload


class DynamicTools:
    """A source of tools known only at run time (the gateway's proxied adapter tools)."""

    #: True when the source appends its own (richer) receipt per call instead of ``tool_call``.
    writes_receipts: bool = False

    def owns(self, name: str) -> bool:
        """Whether ``name`` belongs to this source."""
        raise NotImplementedError

    def knows(self, name: str) -> bool:
        """Whether ``name`` is one of this source's pinned tools (a metric label may carry it)."""
        return False

    def adapter_of(self, name: str) -> str | None:
        """The adapter label of ``name``'s metrics: by default what precedes ``__``."""
        return name.split("__", 1)[0]

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools to list: ``name``, ``description``, ``inputSchema`` and optional extras."""
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """Call one of this source's tools."""
        raise NotImplementedError

    def task_support(self, params: Any) -> str | None:
        """``optional`` or ``required`` when this ``tools/call`` runs as an MCP task (baton.tasks.extension), else None."""
        return None


async def _guarded(run: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    try:
        result = await run()
    except BatonError as exc:
        return exc.to_result()
    except Exception:
        log.exception("tool failed")
        return BatonError(
            "internal_error", "The tool failed unexpectedly; details are in the server log."
        ).to_result()
    result.setdefault("success", True)
    return dict(result)


def invalid_arguments(exc: ValidationError) -> ArgumentError:
    """An ``invalid_arguments`` error naming each bad field (without echoing its value)."""
    problems = [
        {"field": ".".join(str(part) for part in err["loc"]) or "(arguments)", "problem": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]
    fields = ", ".join(problem["field"] for problem in problems)
    return ArgumentError(
        "invalid_arguments", f"The arguments do not match the tool's schema: {fields}.", problems=problems
    )
