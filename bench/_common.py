"""What every benchmark shares: a raw JSON-RPC client over pipes, baton's environment and statistics."""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from baton.config import ENVIRONMENT_VARIABLES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PEERS = Path(__file__).resolve().parent / "peers"
#: A separate interpreter for peers that cannot share the venv with mcp==2.3.0 (used when present).
PEER_VENV_PYTHON = Path("/work/bench-venv/bin/python")
PROTOCOL_VERSION = "2025-11-25"

#: Variables baton reads; blanked so the developer's configuration never changes what is measured.
BATON_VARS = list(ENVIRONMENT_VARIABLES)


def baton_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment running this tree's baton with its own ``BATON_HOME`` and nothing configured."""
    env = {k: v for k, v in os.environ.items() if k not in BATON_VARS}
    env["BATON_HOME"] = str(home)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@contextmanager
def temp_home() -> Iterator[Path]:
    """A throwaway ``BATON_HOME``."""
    with tempfile.TemporaryDirectory(prefix="baton-bench-") as tmp:
        yield Path(tmp) / "home"


def baton_command(*args: str) -> list[str]:
    """``python -m baton serve ...`` with this interpreter."""
    return [sys.executable, "-m", "baton", "serve", *args]


def peer_command(name: str, *args: str, python: str | None = None) -> list[str]:
    """A peer script under ``bench/peers`` run by ``python`` (default: this interpreter)."""
    return [python or sys.executable, str(PEERS / name), *args]


def request(method: str, params: dict[str, Any] | None, request_id: int) -> dict[str, Any]:
    """One JSON-RPC request object."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZE_PARAMS = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "baton-bench", "version": "0"},
}


class PipeClient:
    """The same minimal client for every server: write one JSON line, read lines until the answer."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            bufsize=0,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._in = self.process.stdin
        # read in chunks, as every real client does: a raw pipe's readline reads one byte per system
        # call, which made a 48 KB tools/list answer cost the client ~48,000 reads
        self._out = io.BufferedReader(self.process.stdout, buffer_size=1 << 16)
        self._next_id = 0

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Write one request without waiting; returns its id."""
        self._next_id += 1
        self._in.write(json.dumps(request(method, params, self._next_id)).encode() + b"\n")
        return self._next_id

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Write one notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._in.write(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        """The next response (server notifications and requests are skipped)."""
        while True:
            line = self._out.readline()
            if not line:
                raise RuntimeError(f"server exited (code {self.process.poll()}) before answering")
            message: dict[str, Any] = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                return message

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and wait for its response."""
        sent = self.send(method, params)
        message = self.receive()
        if message.get("id") != sent:
            raise RuntimeError(f"answer to {message.get('id')} while waiting for {sent}")
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        result: dict[str, Any] = message["result"]
        return result

    def initialize(self) -> dict[str, Any]:
        """The MCP handshake: initialize, then notifications/initialized."""
        result = self.call("initialize", INITIALIZE_PARAMS)
        self.notify("notifications/initialized")
        return result

    def close(self) -> None:
        """Close stdin and wait for the server to exit (killing it after 5 s)."""
        with suppress(OSError):
            self._in.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()

    def __enter__(self) -> PipeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summarize(samples_ns: list[int]) -> dict[str, float]:
    """Median, p99, mean and min in microseconds."""
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50_us": statistics.median(ordered) / 1000,
        "p99_us": p99 / 1000,
        "mean_us": statistics.fmean(ordered) / 1000,
        "min_us": ordered[0] / 1000,
    }


def ratio(value: float, reference: float) -> float | None:
    """``value / reference`` rounded for a table, or None without a reference."""
    return round(value / reference, 3) if reference else None


def timed_ns() -> int:
    """The clock every benchmark uses."""
    return time.perf_counter_ns()


def rss_kib(pid: int) -> int:
    """Resident set size of a process (``VmRSS`` in /proc/<pid>/status) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_ms(pid: int) -> float:
    """User plus system CPU time a process has used so far (``/proc/<pid>/stat``), in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")
