"""The suite's reference tools, served as one dynamic tool source of the registry (receipts, limits and
metrics as for any tool); the input-required and task fixtures live in :mod:`.inputs` and :mod:`.tasks`."""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from baton.boundary.toolkit import CallContext, DynamicTools
from baton.wire.conformance.forms import JSON_SCHEMA_2020_12
from baton.wire.conformance.inputs import TOOLS as INPUT_TOOLS
from baton.wire.conformance.media import REQUEST_SCOPED as _REQUEST_SCOPED
from baton.wire.conformance.media import audio, embedded, image, text
from baton.wire.conformance.tasks import TOOLS as TASK_TOOLS
from baton.wire.conformance.tasks import support

Handler = Callable[[dict[str, Any], CallContext], Awaitable[dict[str, Any]]]
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def _content(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"mcp_content": list(blocks)}


async def simple_text(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A single text block."""
    return _content(text("This is a simple text response for testing."))


async def image_content(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A single image block."""
    return _content(image())


async def audio_content(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A single audio block."""
    return _content(audio())


async def embedded_resource(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A single embedded resource block."""
    return _content(
        embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    )


async def mixed_content(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Text, image and resource blocks in one result."""
    resource = embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}')
    return _content(text("Multiple content types test:"), image(), resource)


async def error_handling(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A tool execution error (``isError``), not a protocol error."""
    message = "This tool intentionally returns an error for testing"
    return {"success": False, "error": message, "mcp_content": [text(message)]}


async def with_progress(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Three progress reports through the path baton's own tools report by (:class:`baton.boundary.toolkit.Progress`)."""
    for step in (0, 50, 100):
        await ctx.progress(step, 100, f"Completed step {step} of 100")
    return _content(text("Progress reported: 0, 50, 100 of 100"))


async def with_logging(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Three ``notifications/message`` on the call's stream (2026-07-28: only when the request asked)."""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await _log(ctx, line)
    return _content(text("Tool with logging executed successfully"))


async def _log(ctx: CallContext, line: str) -> None:
    if ctx.session is None:
        return
    with warnings.catch_warnings():  # the logging capability is deprecated in 2026-07-28, still served
        warnings.simplefilter("ignore")
        await ctx.session.send_log_message("info", line, related_request_id=_REQUEST_SCOPED)


async def missing_capability(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Needs sampling: a client that did not declare it gets ``-32021`` naming it."""
    if getattr(ctx.client_capabilities, "sampling", None) is None:
        data: dict[str, Any] = {"requiredCapabilities": {"sampling": {}}}
        return {
            "mcp_protocol_error": {
                "code": -32021,
                "message": "Missing required client capability",
                "data": data,
            }
        }
    return _content(text("Success"))


async def streaming(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A progress report, then the result: the response stream carries notifications, never requests."""
    await ctx.progress(50, 100, "Halfway")
    return _content(text("Streaming complete"))


async def logging_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Logs one line: the SDK sends it only when the request asked for a log level."""
    await _log(ctx, "Diagnostic trace logging activated")
    return _content(text("Logging evaluated"))


async def json_schema_tool(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Echoes its arguments (its listed schema is what the scenario checks)."""
    return _content(text(f"JSON Schema 2020-12 tool called with: {json.dumps(args, sort_keys=True)}"))


async def custom_header(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Its ``region`` argument travels in an ``Mcp-Param-Region`` header too, which the SDK checks."""
    return _content(text(f"Region: {args.get('region')}"))


async def greet(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Synchronous only: never a task."""
    return _content(text(f"Hello, {args.get('name', 'World')}!"))


async def sampling_legacy(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """2025-11-25: asks the client's model over the back-channel."""
    import mcp_types as types

    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=str(args.get("prompt")))
    )
    try:
        answer = await ctx.session.create_message(
            [message], max_tokens=100, related_request_id=_REQUEST_SCOPED
        )
    except Exception as exc:  # the client cannot sample: the result says so
        return _content(text(f"Sampling not supported or error: {type(exc).__name__}"))
    reply = getattr(answer.content, "text", "No response")
    return _content(text(f"LLM response: {reply}"))


def _object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


#: name -> (description, input schema, handler)
TOOLS: dict[str, tuple[str, dict[str, Any], Handler]] = {
    "test_simple_text": ("Tests simple text content response", _NO_ARGUMENTS, simple_text),
    "test_image_content": ("Tests image content response", _NO_ARGUMENTS, image_content),
    "test_audio_content": ("Tests audio content response", _NO_ARGUMENTS, audio_content),
    "test_embedded_resource": ("Tests embedded resource content response", _NO_ARGUMENTS, embedded_resource),
    "test_multiple_content_types": ("Tests text, image and resource content", _NO_ARGUMENTS, mixed_content),
    "test_tool_with_logging": ("Tests log messages during execution", _NO_ARGUMENTS, with_logging),
    "test_tool_with_progress": ("Tests progress notifications", _NO_ARGUMENTS, with_progress),
    "test_error_handling": ("Tests a tool execution error", _NO_ARGUMENTS, error_handling),
    "test_sampling": (
        "Tests server-initiated sampling",
        {**_object_schema(prompt={"type": "string"}), "required": ["prompt"]},
        sampling_legacy,
    ),
    "test_missing_capability": ("Needs the sampling capability", _NO_ARGUMENTS, missing_capability),
    "test_streaming_elicitation": ("Streams a notification, then the result", _NO_ARGUMENTS, streaming),
    "test_logging_tool": ("Logs only when the request asked", _NO_ARGUMENTS, logging_tool),
    "json_schema_2020_12_tool": (
        "Lists a JSON Schema 2020-12 input schema",
        JSON_SCHEMA_2020_12,
        json_schema_tool,
    ),
    "test_custom_header": (
        "Mirrors its region argument into an Mcp-Param header (SEP-2243)",
        {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
        custom_header,
    ),
    "greet": ("Says hello (never a task)", _object_schema(name={"type": "string"}), greet),
    **INPUT_TOOLS,
    **TASK_TOOLS,
}


class FixtureTools(DynamicTools):
    """The reference tools as a dynamic source: listed after baton's own, called through the registry."""

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a fixture tool."""
        return name in TOOLS

    def knows(self, name: str) -> bool:
        """Fixture names may be metric labels."""
        return name in TOOLS

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every fixture tool's definition."""
        return [
            {"name": name, "description": description, "inputSchema": schema}
            for name, (description, schema, _handler) in TOOLS.items()
        ]

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """Run the fixture."""
        return await TOOLS[name][2](arguments, context)

    def task_support(self, params: Any) -> str | None:
        """The task fixtures' declared support (:mod:`.tasks`)."""
        return support(params)
