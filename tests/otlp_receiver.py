"""A real OTLP/HTTP trace receiver on 127.0.0.1: decodes ``ExportTraceServiceRequest`` protobufs."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    service: str
    attributes: dict[str, Any]


@dataclass
class OTLPReceiver:
    """Collects the spans POSTed to ``/v1/traces``; ``endpoint`` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _httpd: LoopbackHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._httpd is not None
        return self._httpd.base_url

    def __enter__(self) -> OTLPReceiver:
        self._httpd = serve_in_thread(_handler(self), "otlp-receiver")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.close()

    def add(self, request: ExportTraceServiceRequest) -> None:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            service=str(resource.get("service.name")),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._changed:
            self.spans.extend(received)
            self._changed.notify_all()

    def wait_for(self, predicate: Any, timeout: float = 300.0) -> list[ReceivedSpan]:
        """Block until ``predicate(spans)`` holds (a condition, not a sleep); returns the spans."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.spans):
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"spans never matched: {[s.name for s in self.spans]}"
                self._changed.wait(remaining)
            return list(self.spans)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _handler(receiver: OTLPReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            if self.path != "/v1/traces" or "protobuf" not in (self.headers.get("content-type") or ""):
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(raw)
            receiver.add(request)
            body = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
