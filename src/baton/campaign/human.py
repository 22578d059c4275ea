"""Reading one live APPROVE/REJECT line from stdin without leaving a blocked reader behind."""

from __future__ import annotations

import os
import re
import select
import time
from typing import Any

import anyio.to_thread

DECISION = re.compile(r"\s*(APPROVE|REJECT)(?:\s*:\s*(.*))?\s*", re.IGNORECASE)
DEFAULT_NOTES = "No additional notes supplied by the live human operator."


def parse_human_decision(line: str) -> tuple[bool, str]:
    """``APPROVE[: notes]`` or ``REJECT[: notes]`` to (approved, notes); anything else is a ValueError."""
    match = DECISION.fullmatch(line)
    if not match:
        raise ValueError("decision must be APPROVE or REJECT, optionally followed by ': notes'")
    return match.group(1).upper() == "APPROVE", (match.group(2) or "").strip() or DEFAULT_NOTES


def _readline_before(stream: Any, deadline: float) -> str:
    """Read bytes up to a newline or EOF, giving up at the deadline (select, so no thread stays blocked)."""
    descriptor = stream.fileno()
    data = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        readable, _, _ = select.select([descriptor], [], [], remaining)
        if not readable:
            raise TimeoutError
        chunk = os.read(descriptor, 1)
        if not chunk or chunk == b"\n":
            return data.decode("utf-8", errors="replace")
        data.extend(chunk)


async def read_decision_line(stream: Any, timeout_seconds: float) -> str:
    """One line from ``stream`` within ``timeout_seconds``; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout_seconds
    return await anyio.to_thread.run_sync(_readline_before, stream, deadline)
