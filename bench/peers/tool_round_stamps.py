"""``baton serve`` with a clock stamp at each point of a subagent's tool round (bench/subagent_tools.py only).

Run: ``python bench/peers/tool_round_stamps.py STAMPS_FILE``. Before baton's own ``main`` runs, this wraps (in
this process only; baton's code is unchanged) the four calls a governed turn passes through and stamps
``time.perf_counter_ns()`` on entry (``>``) and return (``<``):

- ``turn``: ``SubagentRunner._governed_turn``, one sync spawn's turn (opens and closes the record);
- ``governed_model``: baton's ``GovernedModel.request`` (budget, receipt, links around the provider's call);
- ``provider_model``: pydantic-ai's ``OpenAIChatModel.request`` inside it (the model client, the model's
  own time included);
- ``tool``: baton's ``GovernedToolset.call_tool``, the tool call as pydantic-ai's loop hands it to baton
  and gets its result back (registry, policy, sandboxed upstream, ``gateway_call`` receipt, privacy filter).

Each closed record (a list of ``[point, ns]``) is one JSON line appended to STAMPS_FILE. Spawns must come one
at a time (the benchmark's client sends the next request after reading the answer).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

#: A turn whose model asks for one tool and then answers passes the points in this order.
TOOL_ROUND = (
    "turn>",
    "governed_model>",
    "provider_model>",
    "provider_model<",
    "governed_model<",
    "tool>",
    "tool<",
    "governed_model>",
    "provider_model>",
    "provider_model<",
    "governed_model<",
    "turn<",
)


def stamped(original: Callable[..., Any], name: str, record: list[tuple[str, int]]) -> Callable[..., Any]:
    """``original`` (a coroutine function) stamping ``name>`` on entry and ``name<`` on return."""

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        record.append((f"{name}>", time.perf_counter_ns()))
        try:
            return await original(*args, **kwargs)
        finally:
            record.append((f"{name}<", time.perf_counter_ns()))

    return wrapped


def install(path: str) -> None:
    """Wrap the turn's calls; each turn's record goes to ``path`` when the turn ends."""
    from baton.models.pydantic_ai_imports import load_pydantic_ai

    load_pydantic_ai()
    from pydantic_ai.models.openai import OpenAIChatModel

    from baton.subagents import governed, runner

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    record: list[tuple[str, int]] = []
    model, toolset = governed.governed_model_class(), governed.governed_toolset_class()  # cached: baton's own
    model.request = stamped(model.request, "governed_model", record)
    provider_request = stamped(OpenAIChatModel.request, "provider_model", record)
    OpenAIChatModel.request = provider_request  # type: ignore[method-assign]
    toolset.call_tool = stamped(toolset.call_tool, "tool", record)
    turn = stamped(runner.SubagentRunner._governed_turn, "turn", record)

    @functools.wraps(turn)
    async def recorded_turn(*args: Any, **kwargs: Any) -> Any:
        record.clear()
        try:
            return await turn(*args, **kwargs)
        finally:
            os.write(fd, json.dumps(record).encode() + b"\n")

    runner.SubagentRunner._governed_turn = recorded_turn  # type: ignore[method-assign]


def main() -> None:
    """Install the stamps, then run ``baton serve`` exactly as ``python -m baton serve`` does."""
    install(sys.argv[1])
    sys.argv = ["baton", "serve"]
    from baton.launcher import main as baton_main

    baton_main()


if __name__ == "__main__":
    main()
