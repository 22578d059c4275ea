"""The result of ``mcp_ping``: the server answers, and which one."""

from __future__ import annotations

from typing import Literal

from baton.results.base import Ok


class Pong(Ok):
    message: str | None
    server: Literal["baton"]
    version: str
