"""Results of the gateway's tool: the governed MCP adapters, served or not, and why."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from baton.results.base import Ok, Result


class Adapter(Result):
    adapter_id: str
    state: str
    error_class: str | None
    block_reason: str | None
    contract: dict[str, Any] | None = Field(description="The pinned contract it serves.")
    tool_count: int | None
    live: bool
    not_served_reason: str = Field("", description="Promoted but not served by this server: why.")
    blocked: bool = False
    block_error_class: str | None = None
    upstream_running: bool = False
    upstream_starts: int = 0
    upstream_restarts: int = 0
    stderr_bytes: int = 0
    stderr_kept_bytes: int = 0
    stderr_truncated: bool = False
    tools: list[str] = Field([], description="Live adapters: the tools served, as adapter__tool.")
    unprefixed: bool = Field(False, description="Served as tool, not adapter__tool.")
    approval_required: list[str] = Field([])
    network: str = ""
    allowed_origins: list[str] = Field([])


class AdapterList(Ok):
    adapters: list[Adapter]
    count: int
