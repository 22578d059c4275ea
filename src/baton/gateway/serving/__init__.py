"""Serving: live adapters behind the proxy, each call allow-listed, policed and approved."""
