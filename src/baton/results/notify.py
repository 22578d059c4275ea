"""Results of the notification tools: a delivered message and the channels' readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from baton.results.base import Ok, Result


class Sent(Ok):
    channel: str
    provider: str
    recipient: str | None = Field(description="Where it went (never a secret).")
    delivered: Literal[True]
    attempts: int
    receipt_seq: int | None = Field(description="The delivery receipt's seq.")


class ChannelState(Result):
    channel: str
    ready: bool
    provider: str | None
    missing: list[str] = Field(description="Variables still to set.")
    detail: str | None


class Channels(Ok):
    channels: list[ChannelState]
    ready: list[str]
