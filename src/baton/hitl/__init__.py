"""Human in the loop: approval and input requests, decided over MCP, the CLI or the web inbox."""
