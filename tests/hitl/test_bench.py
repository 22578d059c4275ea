"""The HITL benchmark still runs (a few iterations, a small pending list)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hitl_wakeup.py"


def test_the_wakeup_benchmark_reports_median_and_p99() -> None:
    spec = importlib.util.spec_from_file_location("hitl_wakeup", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run(3, pending=20)
    assert result["list_pending"]["pending"] == 20
    # every wake-up was measured (a waiter that never woke would hang or leave a sample out)
    counts = {key: result[key]["count"] for key in ("wakeup_in_process", "wakeup_cross_process_poll")}
    assert counts == {"wakeup_in_process": 3, "wakeup_cross_process_poll": 3}
    assert result["list_pending"]["count"] == 5
    assert "median ms" in module.table(result)
