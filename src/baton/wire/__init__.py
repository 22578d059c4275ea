"""The MCP server on the wire: building it from the tool groups, stdio in and out, streamable HTTP."""
