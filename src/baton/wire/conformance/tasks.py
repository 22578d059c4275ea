"""The Tasks fixtures: tools that baton's Tasks extension (:mod:`baton.tasks.extension`) runs as durable tasks for a
client that declared it; their input goes through the task's ``inputRequests`` and ``tasks/update``
(:meth:`baton.tasks.store.TaskHandle.ask`), or by MRTR when the call is not a task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from baton.boundary.toolkit import CallContext
from baton.wire.conformance.inputs import ask, done
from baton.wire.conformance.media import answer_text, elicitation, plain

Handler = Callable[[dict[str, Any], CallContext], Awaitable[dict[str, Any]]]
CONFIRM = elicitation("Confirm the deletion?", {"confirm": {"type": "boolean"}}, ["confirm"])
NAME = elicitation("What is your name?", {"name": {"type": "string"}}, ["name"])


async def slow_compute(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Sleeps ``seconds`` (a cancelled task stops here), then answers."""
    seconds = float(args.get("seconds", 1))
    await anyio.sleep(max(0.0, min(seconds, 300.0)))
    return done(f"Computed {args.get('label', 'result')} after {seconds:g}s")


async def failing_job(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A tool execution error: the task completes with ``isError``, it does not fail."""
    message = "The job failed (a tool execution error)."
    return {"success": False, "error": message, "mcp_content": [{"type": "text", "text": message}]}


async def protocol_error_job(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A protocol error: the task fails with ``error``, no ``result``."""
    return {"mcp_protocol_error": {"code": -32603, "message": "The job raised a protocol error."}}


async def _input(ctx: CallContext, wanted: dict[str, Any]) -> dict[str, Any] | None:
    """The answers: by ``tasks/update`` in a task, else from this MRTR retry (None: ask first)."""
    if ctx.task is not None:
        return plain(await ctx.task.ask(wanted))
    got = plain(ctx.input_responses)
    return got if wanted.keys() <= got.keys() else None


async def confirm_delete(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Asks once to confirm; deletes nothing either way (a fixture)."""
    wanted = {"confirm": CONFIRM}
    answers = await _input(ctx, wanted)
    if answers is None:
        return ask(wanted)
    content = (answers["confirm"] or {}).get("content") or {}
    verdict = "confirmed" if content.get("confirm") is True else "not confirmed"
    return done(f"Deletion of {args.get('filename', 'the file')} {verdict}")


async def multi_input(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Two input requests at once; the client may answer them one at a time."""
    wanted = {"name": NAME, "confirm": CONFIRM}
    answers = await _input(ctx, wanted)
    if answers is None:
        return ask(wanted)
    return done(f"Received {answer_text(answers['name'], 'name')} and the confirmation")


async def tool_with_task(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """MRTR first (a name), then the task (:func:`support`) whose result carries the name."""
    got = plain(ctx.input_responses)
    if "user_name" not in got:
        return ask({"user_name": NAME})
    return done(f"Task finished for {answer_text(got['user_name'], 'name')}")


_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS: dict[str, tuple[str, dict[str, Any], Handler]] = {
    "slow_compute": (
        "Task: sleeps `seconds`, then answers",
        {"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}},
        slow_compute,
    ),
    "failing_job": ("Task (required): ends in a tool error", _NO_ARGUMENTS, failing_job),
    "protocol_error_job": ("Task: ends in a protocol error", _NO_ARGUMENTS, protocol_error_job),
    "confirm_delete": (
        "Task: asks to confirm a deletion",
        {"type": "object", "properties": {"filename": {"type": "string"}}},
        confirm_delete,
    ),
    "multi_input": ("Task: asks two questions at once", _NO_ARGUMENTS, multi_input),
    "test_tool_with_task": ("MRTR, then a task (required)", _NO_ARGUMENTS, tool_with_task),
}
_SUPPORT = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
}


def support(params: Any) -> str | None:
    """How a call of a fixture runs as a task: ``test_tool_with_task`` only once its MRTR input is in."""
    if params.name == "test_tool_with_task":
        return "required" if "user_name" in (params.input_responses or {}) else None
    return _SUPPORT.get(params.name)
