"""OpenTelemetry traces: OTLP/HTTP export when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, and baton's spans.

Who makes which span:

- ``tools/call {tool}`` (SERVER): the MCP SDK's ``OpenTelemetryMiddleware``, parented on the W3C trace
  context the client sent in ``params._meta`` (``traceparent``/``tracestate``, 2026-07-28);
  :class:`HeaderTraceContext` copies an HTTP ``traceparent`` header into ``_meta`` when the client put
  it only there. baton adds its outcome (``baton.error_class``) to that span.
- ``chat {model}`` (CLIENT): pydantic-ai's instrumentation (:func:`baton.models.providers.model_instrumentation`), with the
  GenAI semantic-convention attributes (``gen_ai.operation.name``, ``gen_ai.request.model``,
  ``gen_ai.usage.*``); prompts and answers are not recorded (the privacy filter's job must not be undone
  by a trace). The provider's HTTP request carries ``traceparent`` (:func:`http_event_hooks`).
- ``hitl.wait``, ``notify {channel}``: :func:`span`.
- ``MCP send tools/call {tool}`` (CLIENT) for a governed adapter's upstream: the SDK's client session,
  which also injects the trace context into the upstream request's ``_meta``.

The SDK and exporter are the optional ``baton[otel]`` extra and are imported only when an endpoint is
configured: without it every span above is OpenTelemetry's no-op and startup imports nothing more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace

log = logging.getLogger("baton.telemetry.tracing")

_lock = threading.Lock()
_state: dict[str, Any] = {"configured": False, "provider": None}


def endpoint_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the standard OTLP variables ask for trace export."""
    env = os.environ if environ is None else environ
    return (
        bool(
            (
                env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or ""
            ).strip()
        )
        and (env.get("OTEL_TRACES_EXPORTER") or "otlp").strip() != "none"
    )


def configure(environ: Mapping[str, str] | None = None) -> bool:
    """Install an OTLP/HTTP exporting tracer provider once, when an endpoint is configured; True if active."""
    with _lock:
        if _state["configured"]:
            return _state["provider"] is not None
        _state["configured"] = True
        if not endpoint_configured(environ):
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but the exporter is not installed: pip install 'baton[otel]'"
            )
            return False
        from baton import __version__

        env = os.environ if environ is None else environ
        resource = Resource.create(
            {"service.name": env.get("OTEL_SERVICE_NAME") or "baton", "service.version": __version__}
        )
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _state["provider"] = provider
        return True


def active() -> bool:
    """Whether spans are exported by this process."""
    return _state["provider"] is not None


def shutdown() -> None:
    """Flush and stop the exporter (also done at interpreter exit by the SDK)."""
    provider = _state["provider"]
    if provider is not None:
        provider.shutdown()


def http_event_hooks() -> dict[str, list[Any]] | None:
    """httpx event hooks that put the current trace context on a provider request (None when inactive)."""
    if not active():
        return None
    from opentelemetry.propagate import inject

    async def add_trace_context(request: Any) -> None:
        inject(request.headers)

    return {"request": [add_trace_context]}


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """An INTERNAL span under the current one (OpenTelemetry's no-op when tracing is off)."""
    clean = {key: value for key, value in (attributes or {}).items() if value is not None}
    with trace.get_tracer("baton").start_as_current_span(name, attributes=clean) as current:
        yield current


class HeaderTraceContext:
    """MCP server middleware: an HTTP ``traceparent`` header is the parent when ``_meta`` carries none.

    It runs before the SDK's own ``OpenTelemetryMiddleware``, which reads the parent from ``_meta`` only.
    """

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        """Copy ``traceparent``/``tracestate`` from the HTTP request into ``ctx.meta`` when missing there."""
        meta = dict(ctx.meta or {})
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        if "traceparent" not in meta and headers is not None and headers.get("traceparent"):
            meta["traceparent"] = headers["traceparent"]
            if headers.get("tracestate"):
                meta["tracestate"] = headers["tracestate"]
            ctx = dataclasses.replace(ctx, meta=meta)
        return await call_next(ctx)
