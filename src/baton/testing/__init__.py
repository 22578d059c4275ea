"""Loopback test peers that speak real protocols on 127.0.0.1, for baton's tests and yours."""

from baton.testing.fake_llm import Behavior, FakeLLMServer

__all__ = ["Behavior", "FakeLLMServer"]
