"""The console's charts: SVG rendered on the server by pygal, embedded inline in the page.

pygal draws the charts; baton only chooses the data and the style. pygal embeds a small
configuration ``<script>`` in every chart for its optional tooltips; the console's CSP runs no
script, so an XML filter removes it before the SVG is serialized.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from baton.console.views import receipts_of
from baton.runtime import Runtime

#: The console's palette (blue, teal, amber, red, violet, grey).
COLOURS = ("#2563eb", "#0d9488", "#d97706", "#dc2626", "#7c3aed", "#64748b")


def _without_scripts(root: Any) -> Any:
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return root


def _config(**overrides: Any) -> dict[str, Any]:
    from pygal.style import Style

    style = Style(
        background="transparent",
        plot_background="transparent",
        foreground="#334155",
        foreground_strong="#0f172a",
        foreground_subtle="#e2e8f0",
        font_family="system-ui, -apple-system, 'Segoe UI', sans-serif",
        label_font_size=11,
        major_label_font_size=11,
        legend_font_size=12,
        title_font_size=14,
        value_font_size=11,
        colors=COLOURS,
        opacity=".85",
        opacity_hover=".95",
        guide_stroke_color="#e2e8f0",
        major_guide_stroke_color="#cbd5e1",
        guide_stroke_dasharray="0",
        major_guide_stroke_dasharray="0",
    )
    return {
        "style": style,
        "js": [],
        "disable_xml_declaration": True,
        "width": 640,
        "height": 320,
        "legend_at_bottom": True,
        "legend_at_bottom_columns": 3,
        "legend_box_size": 10,
        "show_y_guides": True,
        "show_x_guides": False,
        "min_scale": 4,
        "max_scale": 6,
        "margin": 16,
        "margin_bottom": 24,
        "no_data_text": "No data yet",
        **overrides,
    }


def _render(chart: Any) -> str:
    chart.add_xml_filter(_without_scripts)
    return str(chart.render(is_unicode=True))


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _call_labels(calls: list[dict[str, Any]]) -> list[str]:
    return [_when(c["at"]).strftime("%H:%M:%S") for c in calls]


def model_tokens(calls: list[dict[str, Any]]) -> str:
    """Input and output tokens of each model call, in time order (stacked)."""
    import pygal

    chart = pygal.StackedBar(
        **_config(
            title="Model tokens per call",
            x_label_rotation=0,
            show_minor_x_labels=False,
            x_labels_major_count=6,
        )
    )
    chart.x_labels = _call_labels(calls)
    chart.add("input", [c["payload"]["usage"]["input_tokens"] for c in calls])
    chart.add("output", [c["payload"]["usage"]["output_tokens"] for c in calls])
    return _render(chart)


def model_latency(calls: list[dict[str, Any]]) -> str:
    """Latency of each model call in time order, one line per purpose."""
    import pygal

    chart = pygal.Line(
        **_config(
            title="Model latency per call (seconds)",
            dots_size=3,
            show_minor_x_labels=False,
            x_labels_major_count=6,
            allow_interruptions=True,
        )
    )
    chart.x_labels = _call_labels(calls)
    purposes = sorted({str(c["payload"].get("purpose") or "model call") for c in calls})
    for purpose in purposes:
        chart.add(
            purpose.replace("_", " "),
            [
                float(c["payload"]["latency_seconds"])
                if (c["payload"].get("purpose") or "model call") == purpose
                else None
                for c in calls
            ],
        )
    return _render(chart)


def tool_outcomes(calls: list[dict[str, Any]]) -> str:
    """Tool calls by outcome: success, or the error class."""
    import pygal

    counts = Counter(
        "success" if c["payload"].get("success") else str(c["payload"].get("error_class") or "failure")
        for c in calls
    )
    chart = pygal.HorizontalBar(
        **_config(title="Tool calls by outcome", show_legend=False, print_values=True, show_y_guides=False)
    )
    ordered = sorted(counts.items(), key=lambda item: (item[0] != "success", -item[1], item[0]))
    chart.x_labels = [name for name, _count in reversed(ordered)]
    values = [
        {"value": count, "color": COLOURS[1] if name == "success" else COLOURS[3]}
        for name, count in reversed(ordered)
    ]
    chart.add("calls", values)
    return _render(chart)


def approval_waits(decided: list[dict[str, Any]]) -> str:
    """How long each decided request waited for a person (seconds), oldest first."""
    import pygal

    rows = [r for r in reversed(decided) if r.get("waited_seconds") is not None][-30:]
    chart = pygal.Bar(
        **_config(
            title="Approval wait times (seconds)",
            show_legend=False,
            x_label_rotation=30,
            truncate_label=14,
        )
    )
    chart.x_labels = [r["request_id"][-8:] for r in rows]
    chart.add(
        "waited",
        [
            {"value": r["waited_seconds"], "color": COLOURS[0] if r["status"] != "rejected" else COLOURS[3]}
            for r in rows
        ],
    )
    return _render(chart)


def all_charts(runtime: Runtime, decided: list[dict[str, Any]]) -> dict[str, str]:
    """Every chart of the Charts page, as inline SVG."""
    calls = [c for c in receipts_of(runtime, "model_call", limit=500) if "usage" in c["payload"]]
    tools = receipts_of(runtime, "tool_call", "gateway_call", limit=5000)
    return {
        "model_tokens": model_tokens(calls),
        "model_latency": model_latency(calls),
        "tool_outcomes": tool_outcomes(tools),
        "approval_waits": approval_waits(decided),
    }
