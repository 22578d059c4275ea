"""The one hook the tool boundary calls after every tool call: metrics and the current trace span.

Light on purpose (the tool boundary imports it at start): the recorder is plain Python and
``opentelemetry.trace`` is already imported by the MCP SDK.
"""

from __future__ import annotations

from typing import Any

from baton.telemetry.metrics import RECORDER


def observe_tool_call(name: str, result: dict[str, Any], seconds: float, adapter: str | None) -> None:
    """Count the call and mark the SDK's ``tools/call`` span with baton's outcome."""
    error_class = None if result.get("success") else str(result.get("error_class") or "unknown")
    RECORDER.tool_call(name, error_class, seconds, adapter)
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("baton.tool.success", error_class is None)
        if error_class is not None:
            span.set_attribute("baton.error_class", error_class)
        if adapter is not None:
            span.set_attribute("baton.gateway.adapter", adapter)
