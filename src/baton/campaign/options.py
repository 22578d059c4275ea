"""What a campaign run was asked for, and one recorded tool call (shared by the runner and its cases)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: How long a case waits for something that must happen (a subagent finishing, a request appearing, a
#: timer firing): a hang guard, not a margin; the case stops waiting as soon as it happened.
CASE_GUARD_SECONDS = 300.0
#: How often a waiting case looks again.
POLL_SECONDS = 0.25


def default_campaign_id() -> str:
    """A UTC timestamp id, as the reference runner makes them."""
    return datetime.now(UTC).strftime("real_mcp_%Y%m%dT%H%M%SZ")


@dataclass
class CampaignOptions:
    """What ``baton campaign run`` was asked for."""

    campaign_id: str = field(default_factory=default_campaign_id)
    base_dir: Path = field(default_factory=lambda: Path.cwd() / "validation")
    interactive_human: bool = False
    human_timeout_seconds: int = 14_400
    real_notifications: bool = False
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    server_command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "baton", "serve"])
    #: Where the model answers come from, recorded in the summary ("configured provider" or "loopback").
    model_source: str = "configured provider"


@dataclass
class CaseRow:
    """One tool call of the campaign, as written to ``receipts/NN_case.json``."""

    case: str
    tool: str
    arguments: dict[str, Any]
    payload: dict[str, Any]
    is_error: bool
    latency_seconds: float
