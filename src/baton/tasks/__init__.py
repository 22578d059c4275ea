"""The Tasks extension (``io.modelcontextprotocol/tasks``): durable task rows, status, listening."""
