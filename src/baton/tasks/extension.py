"""The Tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28 revision) for baton's long-running tools.

When a 2026-07-28 client declares the extension on a ``tools/call``, baton answers the long-running tools
(approval and input requests, waiting on a request, sync ``mcp_spawn_subagent``,
``mcp_send_message_to_subagent``, governed adapter tools that need an approval) with a ``CreateTaskResult`` and runs the call in the background. The
client polls ``tasks/get``, answers ``inputRequests`` with ``tasks/update`` and may ``tasks/cancel``.

Task state lives in the store (``mcp_tasks``, :mod:`baton.tasks.store`), so ``tasks/get`` answers from any
replica and after a restart. A task that waits for a human is also derived from its request: when the
request is decided or expires, any replica completes the task from it, even if the process that ran the
call is gone.

Each task belongs to the agent that created it (``baton.identity.agents.current_agent``): ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` on another agent's task answer exactly as for an unknown id.
Cancelling a task stops the waiting, never decides: the request stays open to the inbox and the CLI, and
nothing is approved.

A declaring client may also follow its tasks on a ``subscriptions/listen`` stream (``notifications/tasks``,
:mod:`baton.tasks.listen`) instead of polling.

The 2025-11-25 task methods (task-augmented requests, ``tasks/result``, ``tasks/list``) are not served, and
on a 2025-11-25 session the extension's methods answer ``-32601`` (method not found): legacy-era clients
keep progress notifications and ``mcp_wait_for_request``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field

from baton import clock
from baton.tasks.store import TERMINAL, TaskHandle, TaskStore, wire

if TYPE_CHECKING:
    from baton.boundary.toolkit import ToolRegistry

log = logging.getLogger("baton.tasks.extension")


class RegistryLoader(Protocol):
    """Where the extension gets the tool registry once the server has loaded it (the server's loader)."""

    async def get(self) -> ToolRegistry: ...


EXTENSION_ID = "io.modelcontextprotocol/tasks"
#: Tools that become tasks for a declaring client (sync spawns only; see :func:`wants_task`).
TASK_TOOLS = frozenset(
    {
        "mcp_request_admin_approval",
        "mcp_request_admin_input",
        "mcp_wait_for_request",
        "mcp_spawn_subagent",
        "mcp_send_message_to_subagent",
    }
)


#: Tools whose result is the human request's outcome, so any replica can finish their task from it.
HITL_TOOLS = frozenset({"mcp_request_admin_approval", "mcp_request_admin_input", "mcp_wait_for_request"})


class TaskIdParams(BaseModel):
    """``tasks/get`` and ``tasks/cancel`` params (validators built on first use: start-up needs none)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", defer_build=True)
    task_id: str = Field(alias="taskId", min_length=1, max_length=64)


class UpdateParams(TaskIdParams):
    """``tasks/update`` params."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def client_declared(ctx: Any) -> bool:
    """Whether this request's client capabilities name the tasks extension (its own ``_meta`` first)."""
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    meta = getattr(ctx, "meta", None)
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if isinstance(declared, dict):
        return EXTENSION_ID in (declared.get("extensions") or {})
    capabilities = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None) or {}
    return EXTENSION_ID in extensions


def modern_era(protocol_version: str | None) -> bool:
    """Whether the call came over a 2026-07-28 (or later) connection (:func:`baton.hitl.mrtr.modern_era`)."""
    from baton.hitl.mrtr import modern_era as modern

    return modern(protocol_version)


def _task_capable(ctx: Any, request_state: str | None) -> bool:
    """A 2026-07-28 client that declared tasks on this request, with no MRTR round open."""
    return (
        request_state is None and modern_era(getattr(ctx, "protocol_version", None)) and client_declared(ctx)
    )


def wants_task(name: str, arguments: dict[str, Any] | None, ctx: Any, request_state: str | None) -> bool:
    """The server's choice for built-in tools: a long-running one, for a task-capable client."""
    if name not in TASK_TOOLS or not _task_capable(ctx, request_state):
        return False
    return not (name == "mcp_spawn_subagent" and (arguments or {}).get("mode") == "async")


def missing_capability() -> Exception:
    """``-32021``: the client did not declare the tasks extension on this request."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="Missing required client capability",
        data={"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}},
    )


def _not_found(task_id: str) -> Exception:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    return MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: Task not found ({task_id})")


class TasksExtension(Extension):
    """Serves the extension's methods and turns long-running tool calls into tasks."""

    identifier = EXTENSION_ID

    def __init__(self, loader: RegistryLoader, call_tool: Callable[..., Any]) -> None:
        self.loader = loader
        self._call_tool = call_tool
        self._running: dict[str, asyncio.Task[Any]] = {}

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel``, served on 2026-07-28 connections only."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get, modern),
            MethodBinding("tasks/update", UpdateParams, self.update, modern),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel, modern),
        ]

    async def store(self) -> TaskStore:
        """The runtime's one task store (its watchers are shared by every listen stream)."""
        registry = await self.loader.get()
        store = registry.runtime.services.get("mcp_tasks")
        if not isinstance(store, TaskStore):
            store = registry.runtime.services["mcp_tasks"] = TaskStore(registry.runtime)
        return store

    async def _row(self, ctx: Any, task_id: str) -> tuple[TaskStore, dict[str, Any]]:
        """The task, when this caller created it; another agent's task is not found, as an unknown id is
        (per-task authorization: a client may only access the tasks it created; the operator sees all)."""
        if not client_declared(ctx):
            raise missing_capability()
        store = await self.store()
        row = store.get(task_id)
        scope = (await self.caller(ctx)).write_scope
        if row is None or (scope is not None and row["agent"] != scope):
            raise _not_found(task_id)
        return store, row

    async def caller(self, ctx: Any) -> Any:
        """The agent behind this request (its scope decides which tasks it may see)."""
        from baton.identity.agents import current_agent

        return current_agent(ctx, (await self.loader.get()).runtime.settings)

    # tools/call ------------------------------------------------------------------------------------

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        """Answer a long-running call with a durable task and run the call in the background."""
        as_task = wants_task(params.name, params.arguments, ctx, params.request_state) or (
            _task_capable(ctx, params.request_state) and await self._approval_gated(params.name)
        )
        if not as_task and modern_era(getattr(ctx, "protocol_version", None)):
            support = await self._declared_support(params)
            if support == "required" and not client_declared(ctx):
                raise missing_capability()
            as_task = support is not None and client_declared(ctx)
        if not as_task:
            return await call_next(ctx)
        store = await self.store()
        row = store.create(params.name, (await self.caller(ctx)).name)
        handle = TaskHandle(store, row["id"])
        work = asyncio.get_running_loop().create_task(self._run(store, handle, params, ctx), name="mcp-task")
        self._running[row["id"]] = work
        work.add_done_callback(lambda _: self._running.pop(row["id"], None))
        return {"resultType": "task", **wire(row)}

    async def _declared_support(self, params: Any) -> str | None:
        """``optional`` or ``required`` when a dynamic tool source runs this call as a task (the
        conformance fixtures, :mod:`baton.wire.conformance`), else None."""
        from baton.errors import BatonError

        try:
            registry = await self.loader.get()
        except BatonError:  # the server could not load: the call itself answers why
            return None
        for source in registry.dynamic:
            support = source.task_support(params)
            if support is not None:
                return support
        return None

    async def _approval_gated(self, name: str) -> bool:
        """Whether ``name`` is a governed adapter's tool that waits for a human approval."""
        registry = await self.loader.get()
        proxy = registry.runtime.services.get("gateway_proxy")
        split = proxy.split(name) if proxy is not None else None
        return split is not None and split[1] in split[0].policy.tools.approval_required

    async def _run(self, store: TaskStore, handle: TaskHandle, params: Any, ctx: Any) -> None:
        try:
            from baton.boundary.mcp_results import as_wire

            dumped = as_wire(await self._call_tool(ctx, params, handle))
            store.set(
                handle.task_id, status="completed", result=dumped, input_requests=None, status_message=None
            )
        except asyncio.CancelledError:
            store.set(handle.task_id, status="cancelled", status_message="Cancelled; nothing was decided.")
            raise
        except MCPError as exc:  # the call ended in a protocol error: the task failed with it
            error = {"code": exc.error.code, "message": exc.error.message}
            store.set(handle.task_id, status="failed", error=error, status_message="The call failed.")
        except Exception:
            log.exception("task %s failed", handle.task_id)
            error = {"code": -32603, "message": "Internal error"}
            store.set(handle.task_id, status="failed", error=error, status_message="The call failed.")

    # extension methods -----------------------------------------------------------------------------

    async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """``tasks/get``: the task's state, completed from its human request when another process ran it."""
        store, row = await self._row(ctx, params.task_id)
        if row["status"] not in TERMINAL:
            row = self._derive(store, row)
        return {"resultType": "complete", **wire(row)}

    def current(self, store: TaskStore, task_id: str) -> dict[str, Any] | None:
        """The task's row as ``tasks/get`` would show it now (derived from its request when it waits on one)."""
        row = store.get(task_id)
        if row is not None and row["status"] not in TERMINAL:
            row = self._derive(store, row)
        return row

    def _derive(self, store: TaskStore, row: dict[str, Any]) -> dict[str, Any]:
        """Complete a task waiting on a human from the request's own state (any replica, after a crash)."""
        from baton.boundary.mcp_results import as_wire, tool_result
        from baton.errors import BatonError

        if row["expires_epoch"] <= clock.time():
            store.set(row["id"], status="failed", error={"code": -32603, "message": "Task has expired"})
        elif row["request_id"] and row["id"] not in self._running and row["tool"] in HITL_TOOLS:
            from baton.hitl.broker import get_broker
            from baton.hitl.waiting import outcome

            view = get_broker(store.runtime).get(row["request_id"])
            if view["status"] != "pending":
                try:
                    result = outcome(view)
                except BatonError as exc:
                    result = exc.to_result()
                dumped = as_wire(tool_result(result))
                store.set(row["id"], status="completed", result=dumped, input_requests=None)
        return store.get(row["id"]) or row

    async def update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        """``tasks/update``: answers to outstanding ``inputRequests``; unknown or stale keys are ignored."""
        store, row = await self._row(ctx, params.task_id)
        outstanding = row["input_requests"] or {}
        answered = {key: value for key, value in params.input_responses.items() if key in outstanding}
        if row["status"] != "input_required" or not answered:
            return {"resultType": "complete"}
        from baton.hitl.tasks_input import apply_task_answers

        await apply_task_answers(await self.loader.get(), ctx, row, outstanding, answered)
        pending = {key: value for key, value in outstanding.items() if key not in answered}
        # a partial answer leaves the task waiting on the keys still unanswered, and only on those
        store.set(
            row["id"], status="input_required" if pending else "working", input_requests=pending or None
        )
        store.deliver(row["id"], answered)
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """``tasks/cancel``: stop the work (a human's request stays open and undecided)."""
        store, row = await self._row(ctx, params.task_id)
        if row["status"] not in TERMINAL:
            store.set(row["id"], status="cancelled", status_message="Cancelled; nothing was decided.")
            work = self._running.get(row["id"])
            if work is not None:
                work.cancel()
        return {"resultType": "complete"}


def install(
    server: Any, loader: RegistryLoader, call_tool: Callable[..., Any], listen: Callable[[Any], Any]
) -> None:
    """Apply the extension to the low-level server, as ``MCPServer(extensions=...)`` would; ``listen`` makes
    the ``subscriptions/listen`` handler (:class:`baton.tasks.listen.ListenHandler`, passed in by the server so
    that the two modules import one way)."""
    import mcp_types as types
    from mcp.server.extension import compose_tool_call_handler

    extension = TasksExtension(loader, call_tool)
    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, version_gated(method))
    entry = server.get_request_handler("tools/call")
    server.add_request_handler(
        "tools/call", types.CallToolRequestParams, compose_tool_call_handler([extension], entry.handler)
    )
    server.add_request_handler(
        "subscriptions/listen", types.SubscriptionsListenRequestParams, listen(extension)
    )
    server.add_request_handler("server/discover", types.RequestParams, _discover(server))
    server.extensions[EXTENSION_ID] = extension.settings()


def version_gated(method: MethodBinding) -> Callable[..., Any]:
    """The method's handler, answering ``-32601`` (method not found) on any other protocol version.

    A 2025-11-25 session advertises no ``tasks`` capability (that era's core tasks are not served), so its
    ``tasks/*`` requests are methods this server does not have there.
    """
    versions = method.protocol_versions

    async def gated(ctx: Any, params: Any) -> Any:
        if versions is not None and ctx.protocol_version not in versions:
            from mcp.shared.exceptions import MCPError
            from mcp_types import METHOD_NOT_FOUND

            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method.method)
        check_name_header(ctx, params.task_id)
        return await method.handler(ctx, params)

    return gated


def check_name_header(ctx: Any, task_id: str) -> None:
    """SEP-2663 routing headers: an ``Mcp-Name`` that names another task than ``params.taskId`` is refused
    with ``-32020`` (HTTP 400), as the SDK refuses one that disagrees with a tool's name. A request without
    the header passes: the SDK's own client sends it only for the core methods."""
    from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
    from mcp_types import HEADER_MISMATCH

    headers = getattr(getattr(ctx, "request", None), "headers", None)
    sent = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if sent is not None and decode_header_value(sent) != task_id:
        raise MCPError(code=HEADER_MISMATCH, message=f"{MCP_NAME_HEADER} header does not match params.taskId")


def _discover(server: Any) -> Callable[..., Any]:
    """``server/discover`` as the SDK derives it, minus the ``listChanged`` flags: baton's listen streams
    carry task notifications only (it publishes no list-change event), so it promises none."""
    import mcp_types as types
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
        capabilities = server.get_capabilities(protocol_version=ctx.protocol_version)
        if capabilities.tools is not None:
            capabilities.tools.list_changed = False
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=capabilities,
            instructions=server.instructions,
        )

    return discover
