"""A governed adapter's upstream call: its span, the trace context in the upstream's ``_meta``, its metric."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from prometheus_client.parser import text_string_to_metric_families

from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import baton_environ
from tests.otlp_receiver import OTLPReceiver
from tests.servers import free_port, http_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.needs("bwrap"),
]


async def test_the_upstream_call_is_a_child_span_and_carries_the_trace_context_in_meta(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with NpmRegistryServer() as registry, registry_runtime(home, registry) as runtime:
        make_live(runtime, document("traced", publish(registry), [tool("meta")]), allowed=["meta"])
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    port = free_port()
    with OTLPReceiver() as receiver:
        env = baton_environ(
            home,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
        with http_server(env, f"127.0.0.1:{port}", tmp_path):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                result = await client.call_tool(
                    "traced__meta", {}, meta={"traceparent": f"00-{trace_id}-{parent_id}-01"}
                )
            assert result.is_error is False, result
            async with httpx.AsyncClient() as http:
                metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            spans = receiver.wait_for(
                lambda got: (
                    any(s.name == "MCP send tools/call meta" for s in got)
                    and any(s.name == "tools/call traced__meta" for s in got)
                )
            )
    upstream_meta = json.loads(result.content[0].text)
    [tool_span] = [s for s in spans if s.name == "tools/call traced__meta"]
    [upstream] = [s for s in spans if s.name == "MCP send tools/call meta"]
    assert (tool_span.trace_id, tool_span.parent_span_id) == (trace_id, parent_id)
    assert (upstream.trace_id, upstream.parent_span_id) == (trace_id, tool_span.span_id)
    assert upstream_meta["traceparent"].split("-")[1:3] == [trace_id, upstream.span_id]
    assert tool_span.attributes["baton.gateway.adapter"] == "traced"
    gateway = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "baton_gateway_calls_total"
    }
    assert gateway == {(("adapter", "traced"), ("outcome", "ok")): 1}
