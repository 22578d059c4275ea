"""The shapes every tool result builds on: a strict success base and the one open error shape."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Ok", "Result", "ToolError"]


class Result(BaseModel):
    """A fixed result shape: every field it may carry is listed, nothing else is allowed."""

    model_config = ConfigDict(extra="forbid")


class ToolError(BaseModel):
    """Every failure: one human sentence and a stable class, plus the details of that class.

    The one open shape (no ``additionalProperties``): an error class carries its own details (``missing``
    for an unconfigured channel, ``problems`` for invalid arguments, the request's state for
    ``hitl_timeout``; docs/error-classes.md). Its fields need no description in every tool: the server's
    instructions say what ``error`` and ``error_class`` are.
    """

    success: Literal[False]
    error: str
    error_class: str


class Ok(Result):
    success: Literal[True]
