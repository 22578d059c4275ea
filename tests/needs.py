"""Tests that need a tool on the machine: they fail under CI when it is missing, and skip (with the reason)
anywhere else.

Mark a test or a module with ``@pytest.mark.needs("bwrap", "node")`` (the conftest checks the marks before
each test), or call :func:`require` inside a fixture. CI sets ``CI=true``; ``.ci/run`` installs every tool,
so a missing one there is a broken machine or a broken install step, never a reason to go green.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI`` set to a true value, as CI services and ``.ci/run`` do)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@functools.cache
def _bwrap() -> str | None:
    from baton.gateway.sandbox.sandbox import BubblewrapSandbox

    reason = BubblewrapSandbox().unavailable_reason()
    return f"bubblewrap cannot run here (it needs working user namespaces): {reason}" if reason else None


@functools.cache
def _node() -> str | None:
    missing = [name for name in ("node", "npm") if shutil.which(name) is None]
    return f"{' and '.join(missing)} not installed (apt-get install nodejs npm)" if missing else None


@functools.cache
def _chromium() -> str | None:
    if Path("/usr/bin/chromium").exists():
        return None
    return "Debian's chromium is not at /usr/bin/chromium (apt-get install chromium)"


@functools.cache
def _tmux() -> str | None:
    return None if shutil.which("tmux") else "tmux is not installed (apt-get install tmux)"


@functools.cache
def _postgresql() -> str | None:
    from baton.testing.postgres import find_bin_dir

    if find_bin_dir() is None:
        return "PostgreSQL's server binaries are not installed (apt-get install postgresql)"
    return None


@functools.cache
def _npm_registry() -> str | None:
    import httpx

    try:
        httpx.head("https://registry.npmjs.org/", timeout=10)
    except httpx.HTTPError as exc:
        return f"the npm registry is unreachable: {exc}"
    return None


PROBES: dict[str, Callable[[], str | None]] = {
    "bwrap": _bwrap,
    "node": _node,
    "chromium": _chromium,
    "tmux": _tmux,
    "postgresql": _postgresql,
    "npm-registry": _npm_registry,
}


#: Tools to treat as missing (comma-separated), so the suite can check its own CI rule (tests/test_needs.py).
PRETEND_MISSING = "BATON_TESTS_PRETEND_MISSING"


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot be used here, or None when it can."""
    if tool in os.environ.get(PRETEND_MISSING, "").split(","):
        return f"{PRETEND_MISSING} names it"
    return PROBES[tool]()


def require(*tools: str) -> None:
    """Fail (under CI) or skip (elsewhere) the current test when one of ``tools`` is missing."""
    for tool in tools:
        reason = missing(tool)
        if reason is None:
            continue
        if in_ci():
            pytest.fail(f"CI needs {tool}, but {reason}", pytrace=False)
        pytest.skip(f"needs {tool}: {reason}")
