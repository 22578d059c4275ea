"""Subagents: delegated model conversations with prepared, privacy-filtered context."""
