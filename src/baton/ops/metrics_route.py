"""Prometheus metrics at ``/metrics`` of ``baton serve --http``.

Two kinds of series:

- events this process saw are counted by :mod:`baton.telemetry.metrics` and read at scrape time;
- state that lives in the store (pending HITL requests, decisions, subagents by status, receipts, today's
  spend) is queried from the store at scrape time by a custom collector, so every replica on one store
  reports the same value: aggregate those with ``max``, the per-process counters with ``sum``.

``prometheus_client`` is imported only when the HTTP app builds the route: ``baton serve`` on stdio
never pays for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from baton.telemetry.metrics import DURATION_BUCKETS, RECORDER, Recorder

if TYPE_CHECKING:
    from baton.runtime import Runtime


def store_state(runtime: Runtime) -> dict[str, Any]:
    """The store-backed series: a handful of grouped counts and two single-row reads."""
    from sqlalchemy import func, select

    from baton.models.budgets import DailyBudget
    from baton.store.schema import hitl_requests, receipt_head, subagents

    with runtime.store.read() as connection:
        pending = connection.execute(
            select(func.count()).where(hitl_requests.c.status == "pending")
        ).scalar_one()
        decisions = connection.execute(
            select(hitl_requests.c.decided_via, hitl_requests.c.status, func.count())
            .where(hitl_requests.c.status != "pending")
            .group_by(hitl_requests.c.decided_via, hitl_requests.c.status)
        ).all()
        by_status = connection.execute(
            select(subagents.c.status, func.count()).group_by(subagents.c.status)
        ).all()
        head = connection.execute(select(receipt_head.c.seq).where(receipt_head.c.id == 1)).scalar()
    today = DailyBudget(runtime.store, runtime.settings).spent()
    return {
        "hitl_pending": int(pending),
        "hitl_decisions": {(via or "expiry", status): int(n) for via, status, n in decisions},
        "subagents": {status: int(n) for status, n in by_status},
        "receipts": int(head or 0),
        "spend_today": today,
    }


def build_collector(runtime: Runtime, recorder: Recorder = RECORDER) -> Any:
    """A prometheus_client collector over ``recorder`` and ``runtime``'s store."""
    from prometheus_client.metrics_core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )
    from prometheus_client.registry import Collector

    class BatonCollector(Collector):
        def collect(self) -> Iterator[Any]:
            events = recorder.snapshot()
            calls = CounterMetricFamily(
                "baton_tool_calls", "Tool calls served by this process.", labels=["tool", "error_class"]
            )
            for (tool, error_class), n in sorted(events["tool_calls"].items()):
                calls.add_metric([tool, error_class], n)
            yield calls
            durations = HistogramMetricFamily(
                "baton_tool_call_duration_seconds", "Tool call duration.", labels=["tool"]
            )
            for tool, (counts, total, total_sum) in sorted(events["tool_durations"].items()):
                buckets = [(_bound(b), c) for b, c in zip(DURATION_BUCKETS, counts, strict=True)]
                durations.add_metric([tool], [*buckets, ("+Inf", total)], total_sum)
            yield durations
            tokens = CounterMetricFamily(
                "baton_model_tokens", "Model tokens.", labels=["provider", "model", "direction"]
            )
            for key, n in sorted(events["model_tokens"].items()):
                tokens.add_metric(list(key), n)
            yield tokens
            cost = CounterMetricFamily(
                "baton_model_cost_usd",
                "Model cost in US dollars (priced calls).",
                labels=["provider", "model"],
            )
            for key, usd in sorted(events["model_cost"].items()):
                cost.add_metric(list(key), usd)
            yield cost
            gateway = CounterMetricFamily(
                "baton_gateway_calls", "Calls to governed adapters' tools.", labels=["adapter", "outcome"]
            )
            for key, n in sorted(events["gateway_calls"].items()):
                gateway.add_metric(list(key), n)
            yield gateway
            yield from _store_families(store_state(runtime), CounterMetricFamily, GaugeMetricFamily)

    return BatonCollector()


def _store_families(state: dict[str, Any], counter: Any, gauge: Any) -> Iterator[Any]:
    pending = gauge("baton_hitl_pending", "Human-in-the-loop requests awaiting a decision (store).")
    pending.add_metric([], state["hitl_pending"])
    yield pending
    decisions = counter(
        "baton_hitl_decisions",
        "Human-in-the-loop requests decided, by channel and decision (store).",
        labels=["decided_via", "decision"],
    )
    for (via, status), n in sorted(state["hitl_decisions"].items()):
        decisions.add_metric([via, status], n)
    yield decisions
    subagent_family = gauge("baton_subagents", "Subagents by status (store).", labels=["status"])
    for status, n in sorted(state["subagents"].items()):
        subagent_family.add_metric([status], n)
    yield subagent_family
    receipts = counter("baton_receipts", "Receipts in the chain (store).")
    receipts.add_metric([], state["receipts"])
    yield receipts
    today = state["spend_today"]
    spent_tokens = gauge("baton_budget_daily_spent_tokens", "Model tokens spent today, UTC (store).")
    spent_tokens.add_metric([], today.total_tokens)
    yield spent_tokens
    spent_usd = gauge("baton_budget_daily_spent_usd", "Model cost spent today, UTC (store).")
    spent_usd.add_metric([], today.cost_usd)
    yield spent_usd


def _bound(value: float) -> str:
    return repr(float(value))


def routes(runtime: Runtime) -> list[Any]:
    """``GET /metrics`` in Prometheus text format (access is guarded like ``/mcp`` by the server)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    registry = CollectorRegistry(auto_describe=False)
    registry.register(build_collector(runtime))

    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return [Route("/metrics", metrics, methods=["GET"])]
