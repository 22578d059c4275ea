"""Each campaign gate fails when its capability is broken: the campaign drives a deliberately broken server.

``tests/campaign_breakers.py`` is the campaign's ``server_command``: ``baton serve`` with one thing broken.
The healthy run (tests/test_campaign.py) shows every core gate true; here each breakage turns its gate false.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from baton.campaign.runner import CampaignOptions, run_campaign_sync
from baton.errors import BatonError
from baton.testing import FakeLLMServer
from tests.test_campaign import campaign_env

BREAKERS = Path(__file__).with_name("campaign_breakers.py")

pytestmark = pytest.mark.slow


def run_broken(capability: str, baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path) -> dict:
    """Run the campaign against a server with ``capability`` broken; its summary."""
    options = CampaignOptions(
        campaign_id="broken",
        base_dir=tmp_path / "validation",
        environ=campaign_env(baton_env, fake_llm),
        server_command=[sys.executable, str(BREAKERS), capability],
        model_source="loopback",
    )
    if capability == "secret_in_files":  # a leaked secret refuses the bundle after the summary is written
        with pytest.raises(BatonError) as refused:
            run_campaign_sync(options)
        assert refused.value.error_class == "campaign_bundle_invalid"
    else:
        run_campaign_sync(options)
    return json.loads((tmp_path / "validation" / "broken" / "summary.json").read_text())


@pytest.mark.parametrize(
    ("capability", "gate"),
    [
        ("scheduler", "timers_fire_and_cancel"),
        ("fired_elsewhere", "timers_fire_and_cancel"),  # a succeeded firing of some other timer is not it
        ("privacy", "privacy_canary_absent_from_model_requests"),
        ("hitl_expiry", "hitl_pending_response_and_conservative_timeout"),
        ("receipt_chain", "receipt_chain_verifies"),
        ("receipt_chain_late", "receipt_chain_verifies"),  # fails with receipts counted before the break
        ("lifecycle", "sync_async_message_cancel_status_lifecycle"),
        ("context_strategy", "two_real_context_strategies_compared"),
        ("secret_in_files", "no_secret_in_bundle"),
        ("catalog", "real_mcp_catalog_has_required_primitives"),
        ("adapters", "adapters_listed_with_contracts"),
        ("governed_approval", "subagent_used_governed_tool"),
    ],
)
def test_a_broken_capability_turns_its_gate_false(
    capability: str,
    gate: str,
    baton_env: dict[str, str],
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # latest.json is written in the working directory
    if capability == "scheduler":
        # this breaker's timers never fire, so the case waits out its whole hang guard (300 s); a shorter
        # guard can only make the gate fail sooner, never pass
        monkeypatch.setattr("baton.campaign.cases.CASE_GUARD_SECONDS", 30.0)
    summary = run_broken(capability, baton_env, fake_llm, tmp_path)
    assert summary["gates"][gate] is False, summary["gates"]
    if capability == "governed_approval":  # the gated call really went upstream, and nobody was asked
        chain = json.loads((tmp_path / "validation" / "broken" / "receipts_chain.json").read_text())
        transfers = [
            r["payload"] for r in chain if r["kind"] == "gateway_call" and r["payload"]["tool"] == "transfer"
        ]
        assert transfers, chain
        assert all(p["success"] and not (p.get("approval") or {}).get("request_id") for p in transfers)
    assert summary["status"] == "failed"
    # one capability broken turns one core gate false, not all of them (each gate reads its own evidence)
    core = {"receipt_chain_verifies", "no_secret_in_bundle", "real_mcp_catalog_has_required_primitives"}
    assert any(summary["gates"][name] for name in core - {gate}), summary["gates"]
