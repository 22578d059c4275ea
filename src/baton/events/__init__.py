"""Events (experimental): the draft MCP Events extension's push and poll delivery of three baton events."""
