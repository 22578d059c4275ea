"""``/metrics`` of ``baton serve --http``: Prometheus text, guarded like /mcp, store gauges shared by replicas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from baton.testing import FakeLLMServer
from tests.servers import free_port, http_server

pytestmark = pytest.mark.anyio

TOKEN = "bearer-token-for-metrics-0001"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(port: int, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        return await http.get(f"http://127.0.0.1:{port}/metrics")


async def test_three_pings_over_http_show_three_tool_calls_behind_the_token(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    with http_server({**baton_env, "BATON_HTTP_TOKEN": TOKEN}, f"127.0.0.1:{port}", tmp_path):
        refused = await scrape(port, token=None)
        assert refused.status_code == 401
        assert (await scrape(port, token="wrong")).status_code == 401
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport) as client:
                for _ in range(3):
                    result = await client.call_tool("mcp_ping", {})
                    assert result.structured_content["success"] is True
                bad = await client.call_tool("mcp_get_subagent_status", {"subagent_id": "sa_missing"})
                assert bad.structured_content["error_class"] == "subagent_not_found"
        response = await scrape(port)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    assert got[("baton_tool_calls_total", (("error_class", ""), ("tool", "mcp_ping")))] == 3
    assert (
        got[
            (
                "baton_tool_calls_total",
                (("error_class", "subagent_not_found"), ("tool", "mcp_get_subagent_status")),
            )
        ]
        == 1
    )
    assert got[("baton_tool_call_duration_seconds_count", (("tool", "mcp_ping"),))] == 3
    assert got[("baton_tool_call_duration_seconds_bucket", (("le", "+Inf"), ("tool", "mcp_ping")))] == 3
    assert got[("baton_hitl_pending", ())] == 0
    # every tool call leaves a receipt, and the chain's length is read from the store
    assert got[("baton_receipts_total", ())] >= 4


async def test_store_series_agree_across_replicas_and_model_calls_are_counted(
    model_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    env = {
        **model_env,
        "COLLAB_PROVIDER": "openai",
        "OPENAI_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": "sk-test-openai-0123456789abcdef",
    }
    port_a, port_b = free_port(), free_port()
    with (
        http_server(env, f"127.0.0.1:{port_a}", tmp_path),
        http_server(env, f"127.0.0.1:{port_b}", tmp_path),
    ):
        async with Client(f"http://127.0.0.1:{port_a}/mcp") as client:
            spawned = await client.call_tool("mcp_spawn_subagent", {"task": "Summarise."})
            assert spawned.structured_content["success"] is True
        a = samples((await scrape(port_a, token=None)).text)
        b = samples((await scrape(port_b, token=None)).text)
    for key in [
        ("baton_subagents", (("status", "completed"),)),
        ("baton_receipts_total", ()),
        ("baton_budget_daily_spent_tokens", ()),
    ]:
        assert a[key] == b[key] and a[key] > 0, key
    labels = (("direction", "input"), ("model", "gpt-4o-mini"), ("provider", "openai"))
    assert a[("baton_model_tokens_total", labels)] > 0
    assert a[("baton_model_cost_usd_total", (("model", "gpt-4o-mini"), ("provider", "openai")))] > 0
    assert ("baton_model_tokens_total", labels) not in b  # per-process counters: replica B made no call


def test_stdio_serving_never_imports_prometheus_client(baton_env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from baton.runtime import Runtime\n"
        "from baton.wire.server import build_registry\n"
        "import anyio\n"
        "registry = build_registry(Runtime.open())\n"
        "from baton.boundary.toolkit import CallContext\n"
        "result = anyio.run(registry.call, 'mcp_ping', {}, CallContext())\n"
        "assert result['success'], result\n"
        "print('prometheus_client' in sys.modules, 'opentelemetry.sdk' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=baton_env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
