"""The tool boundary: typed tool specs, argument limits, results as MCP, and the per-call hooks."""
