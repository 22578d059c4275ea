"""OpenTelemetry: spans exported over OTLP/HTTP to a real loopback receiver, parented on the client's context."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from baton.testing import FakeLLMServer
from tests.otlp_receiver import OTLPReceiver, ReceivedSpan
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

SERVER, CLIENT = 2, 3  # OTLP span kinds


def traced_env(model_env: dict[str, str], receiver: OTLPReceiver) -> dict[str, str]:
    return {
        **model_env,
        "COLLAB_PROVIDER": "openai",
        "OPENAI_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": "sk-test-openai-0123456789abcdef",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "baton-under-test",
    }


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


async def test_a_spawn_with_context_preparation_exports_its_span_tree_under_the_clients_trace(
    model_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    port = free_port()
    with (
        OTLPReceiver() as receiver,
        http_server(traced_env(model_env, receiver), f"127.0.0.1:{port}", tmp_path),
    ):
        headers = {"traceparent": f"00-{trace_id}-{parent_id}-01"}  # the W3C context in HTTP headers
        async with httpx.AsyncClient(
            headers=headers, timeout=120
        ) as http:  # a busy machine is slow, never a failure
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport) as client:
                result = await client.call_tool(
                    "mcp_spawn_subagent",
                    {
                        "task": "Decide the refund.",
                        "context_strategy": "llm_generated",
                        "parent_context": {"customer": {"tier": "gold"}, "order": 1182},
                        "business_rules": "Only the tier matters.",
                    },
                )
                assert result.structured_content["success"] is True, result.structured_content
        spans = receiver.wait_for(
            lambda got: (
                len(named(got, "chat gpt-4o-mini")) == 2 and named(got, "tools/call mcp_spawn_subagent")
            )
        )
    [tool] = named(spans, "tools/call mcp_spawn_subagent")
    assert (tool.trace_id, tool.parent_span_id, tool.kind) == (trace_id, parent_id, SERVER)
    assert tool.service == "baton-under-test"
    assert tool.attributes["gen_ai.tool.name"] == "mcp_spawn_subagent"
    assert tool.attributes["baton.tool.success"] is True
    prep, turn = named(spans, "chat gpt-4o-mini")
    for model_span in (prep, turn):
        assert (model_span.trace_id, model_span.parent_span_id) == (trace_id, tool.span_id)
        assert model_span.attributes["gen_ai.request.model"] == "gpt-4o-mini"
        assert model_span.attributes["gen_ai.usage.input_tokens"] > 0
        # message structure is recorded, their text is not: prompts and answers stay out of traces
        assert "Decide the refund" not in str(model_span.attributes)
        assert "Considered" not in str(model_span.attributes)
    # the model provider's HTTP requests carried the trace context of their model spans
    sent = [r.headers.get("traceparent", "") for r in fake_llm.requests]
    assert [value.split("-")[1:3] for value in sent] == [[trace_id, prep.span_id], [trace_id, turn.span_id]]


async def test_meta_traceparent_is_the_parent_over_http(
    model_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    port = free_port()
    with (
        OTLPReceiver() as receiver,
        http_server(traced_env(model_env, receiver), f"127.0.0.1:{port}", tmp_path),
    ):
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            meta = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
            result = await client.call_tool("mcp_ping", {}, meta=meta)  # type: ignore[arg-type]
            assert result.structured_content["success"] is True
        spans = receiver.wait_for(lambda got: named(got, "tools/call mcp_ping"))
    [ping] = named(spans, "tools/call mcp_ping")
    assert (ping.trace_id, ping.parent_span_id) == (trace_id, parent_id)


def test_tracing_without_the_extra_or_endpoint_imports_no_sdk(baton_env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from baton.telemetry.tracing import configure\n"
        "print(configure(), 'opentelemetry.sdk' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=baton_env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


async def test_a_human_wait_and_its_notification_are_spans_of_the_tool_call(
    model_env: dict[str, str], tmp_path: Path
) -> None:
    from baton.testing.webhooks import WebhookReceiver

    port = free_port()
    with OTLPReceiver() as receiver, WebhookReceiver() as hook:
        env = {**traced_env(model_env, receiver), "HITL_WEBHOOK_URL": hook.url("/hitl")}
        with http_server(env, f"127.0.0.1:{port}", tmp_path):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                result = await client.call_tool(
                    "mcp_request_admin_approval", {"request_message": "Ship it?", "timeout_seconds": 1}
                )
                assert result.structured_content["error_class"] == "hitl_timeout"
            spans = receiver.wait_for(
                lambda got: (
                    named(got, "hitl.wait")
                    and named(got, "notify webhook")
                    and named(got, "tools/call mcp_request_admin_approval")
                )
            )
    [tool] = named(spans, "tools/call mcp_request_admin_approval")
    [wait] = named(spans, "hitl.wait")
    assert (wait.trace_id, wait.parent_span_id) == (tool.trace_id, tool.span_id)
    assert wait.attributes["baton.hitl.status"] == "expired"
    [notify] = named(spans, "notify webhook")
    assert notify.trace_id == tool.trace_id
    assert notify.attributes["baton.notify.delivered"] is True
    assert tool.attributes["baton.error_class"] == "hitl_timeout"
