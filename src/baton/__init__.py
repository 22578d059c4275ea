"""baton: one MCP server for subagents, humans in the loop, notifications, timers and governed tools."""

__version__ = "0.1.0"

__all__ = ["__version__"]
