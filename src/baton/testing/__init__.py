"""Loopback test peers that speak real protocols on 127.0.0.1, for baton's tests and yours."""

from baton.testing.clock import ManualClock
from baton.testing.fake_llm import Behavior, FakeLLMServer, ToolCall
from baton.testing.smtp import ReceivedMail, SMTPReceiver
from baton.testing.webhooks import ReceivedRequest, SilentServer, WebhookReceiver

__all__ = [
    "Behavior",
    "FakeLLMServer",
    "ManualClock",
    "ReceivedMail",
    "ReceivedRequest",
    "SMTPReceiver",
    "SilentServer",
    "ToolCall",
    "WebhookReceiver",
]
