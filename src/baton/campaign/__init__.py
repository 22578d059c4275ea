"""The validation campaign: drive every primitive through a real MCP client and write a verifiable bundle."""
