"""The base every table of an adapter policy builds on: unknown keys, coercion and later changes refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PolicyTable(BaseModel):
    """A policy table validated fail-closed: no extra key, no type coercion, frozen once read."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
