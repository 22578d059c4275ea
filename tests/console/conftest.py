"""Console fixtures: the HTTP-server factory the inbox tests use."""

from __future__ import annotations

from tests.hitl.conftest import http_server_factory

__all__ = ["http_server_factory"]
