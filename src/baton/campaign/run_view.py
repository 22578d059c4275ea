"""What the cases and the gates need from the run driving them (:class:`baton.campaign.runner.Campaign`):
one protocol, so :mod:`baton.campaign.cases` and :mod:`baton.campaign.gates` share it without importing
each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from baton.campaign.bundle import BundleWriter
from baton.campaign.options import CampaignOptions, CaseRow


class Campaign(Protocol):
    """The run as the cases and gates see it."""

    options: CampaignOptions
    env: dict[str, str]
    bundle: BundleWriter
    rows: list[CaseRow]
    run_dir: Path
    tool_names: set[str]

    async def call(self, case: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool and record the row."""
        ...

    async def human_decision(
        self, request_id: str, message: str, context: dict[str, Any], deadline: float
    ) -> dict[str, Any]:
        """One live decision from a person."""
        ...
