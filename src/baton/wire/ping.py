"""``mcp_ping``: a cheap read-only tool that proves the server answers (and what a call costs)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from baton import __version__
from baton.boundary.toolkit import CallContext, ToolArgs, ToolRegistry


class PingArgs(ToolArgs):
    """Arguments of ``mcp_ping``."""

    message: str | None = Field(None, max_length=1000, description="Text echoed back in `message`.")


def register(registry: ToolRegistry) -> None:
    """Add ``mcp_ping`` to the registry."""

    @registry.tool("mcp_ping", PingArgs, read_only=True, quiet=True)
    async def ping(args: PingArgs, ctx: CallContext) -> dict[str, Any]:
        """Check that baton answers.

        Echoes message with the server's version; touches no state but the tool-call receipt every
        call writes."""
        return {"message": args.message, "server": "baton", "version": __version__}
