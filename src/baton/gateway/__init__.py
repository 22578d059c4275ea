"""Governed external MCP servers: policy, lock, independent verify, sandboxed replay (SPEC.md section 6)."""
