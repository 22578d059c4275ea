"""Counters of what this process saw, for Prometheus at ``/metrics`` (:mod:`baton.ops.metrics_route`).

Events this process saw (tool calls and their durations, model tokens and cost, gateway calls) are counted
in plain Python here, always (a dict update per call), and read at scrape time. The store-backed series
and the route itself live in :mod:`baton.ops.metrics_route`, above the subsystems whose tables they read.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: Upper bounds (seconds) of the tool-call duration histogram; HITL waits reach minutes.
DURATION_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    total: int = 0
    sum: float = 0.0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(DURATION_BUCKETS):
            if value <= bound:
                self.counts[index] += 1
        self.total += 1
        self.sum += value


@dataclass
class Recorder:
    """This process's event counters (thread-safe; readers get copies)."""

    tool_calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    tool_durations: dict[str, _Histogram] = field(default_factory=lambda: defaultdict(_Histogram))
    model_tokens: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    model_cost: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    gateway_calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tool_call(self, tool: str, error_class: str | None, seconds: float, adapter: str | None) -> None:
        """Count one tool call (and, for a governed adapter's tool, one gateway call)."""
        with self.lock:
            self.tool_calls[(tool, error_class or "")] += 1
            self.tool_durations[tool].observe(seconds)
            if adapter is not None:
                self.gateway_calls[(adapter, error_class or "ok")] += 1

    def model_call(
        self, provider: str, model: str, input_tokens: int, output_tokens: int, cost_usd: float | None
    ) -> None:
        """Count one model call's tokens and cost."""
        with self.lock:
            self.model_tokens[(provider, model, "input")] += input_tokens
            self.model_tokens[(provider, model, "output")] += output_tokens
            self.model_cost[(provider, model)] += cost_usd or 0.0

    def snapshot(self) -> dict[str, Any]:
        """Copies of every counter, for one scrape."""
        with self.lock:
            return {
                "tool_calls": dict(self.tool_calls),
                "tool_durations": {
                    tool: (list(h.counts), h.total, h.sum) for tool, h in self.tool_durations.items()
                },
                "model_tokens": dict(self.model_tokens),
                "model_cost": dict(self.model_cost),
                "gateway_calls": dict(self.gateway_calls),
            }


#: The process's recorder (one per process, like prometheus_client's default registry).
RECORDER = Recorder()
