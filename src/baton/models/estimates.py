"""How many output tokens a model call is expected to spend, for the daily budget's reservation.

Reserving the output cap (``COLLAB_MAX_TOKENS``) for every call refuses calls while most of the day is
left: a 2,048-token cap on a 1,000-token day lets one call in at a time. The estimate is learned instead:
a high percentile of the model's last :data:`RECENT_OUTPUTS` answers (read back from the chain's
``model_call`` receipts when a process first needs it, so a restart keeps what was learned), with the
cap as its ceiling and :data:`FIRST_OUTPUT_ESTIMATE` before any answer is known. Each call's receipt
settles the reservation with what it really spent.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable

from sqlalchemy import select

from baton.store.engine import Store
from baton.store.schema import receipts

#: How many recent answers of the model the estimate is learned from.
RECENT_OUTPUTS = 64

#: Which of them: the estimate covers this share of recent answers.
PERCENTILE = 0.95

#: The output estimate before any answer of the model is known (a long paragraph).
FIRST_OUTPUT_ESTIMATE = 256


class OutputEstimate:
    """The output tokens to reserve for the next call of one model: learned, the cap its ceiling."""

    def __init__(self, cap: int, history: Callable[[], Iterable[int]] | None = None) -> None:
        self.cap = cap
        self._history = history
        self._recent: deque[int] = deque(maxlen=RECENT_OUTPUTS)
        self._lock = threading.Lock()
        self._seeded = history is None

    def tokens(self) -> int:
        """The estimate: the percentile of recent answers, at most the cap, at least one token."""
        self._seed()
        with self._lock:
            recent = sorted(self._recent)
        if not recent:
            return min(self.cap, FIRST_OUTPUT_ESTIMATE)
        learned = recent[max(0, math.ceil(PERCENTILE * len(recent)) - 1)]
        return max(1, min(self.cap, learned))

    def record(self, output_tokens: int) -> None:
        """Learn from one answer."""
        with self._lock:
            self._recent.append(max(0, output_tokens))

    def _seed(self) -> None:
        """Learn from the answers the store already holds (once per process)."""
        if self._seeded or self._history is None:
            return
        lengths = list(self._history())
        with self._lock:
            if not self._seeded:
                self._seeded = True
                fresh = list(self._recent)
                self._recent.clear()
                self._recent.extend(lengths[-RECENT_OUTPUTS:] + fresh)


def recorded_outputs(store: Store, provider: str, model: str) -> list[int]:
    """The output tokens of the model's last answered calls in the chain, oldest first."""
    query = (
        select(receipts.c.payload)
        .where(receipts.c.kind == "model_call")
        .order_by(receipts.c.seq.desc())
        .limit(RECENT_OUTPUTS * 4)
    )
    with store.read() as connection:
        payloads = [row.payload for row in connection.execute(query)]
    lengths = []
    for payload in reversed(payloads):
        try:
            call = json.loads(payload)
        except ValueError:
            continue
        answered = "usage" in call and not call.get("error_class")
        name = str((call.get("response") or {}).get("model") or "")
        if answered and call.get("provider") == provider and name.startswith(model):
            lengths.append(int((call.get("usage") or {}).get("output_tokens") or 0))
    return lengths
