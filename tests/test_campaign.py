"""The validation campaign end to end: a real `baton campaign run` subprocess driving `baton serve` over stdio."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from baton.campaign.gates import classify_status
from baton.campaign.governed import governed_script
from baton.campaign.human import parse_human_decision
from baton.campaign.verify import verify_bundle
from baton.chain_verify import read_public_key
from baton.testing import Behavior, FakeLLMServer
from baton.testing.smtp import SMTPReceiver
from baton.testing.webhooks import WebhookReceiver
from tests.cli_process import run_cli
from tests.conftest import FAKE_MOONSHOT_KEY
from tests.notify_support import SMTP_PASSWORD, SMTP_USERNAME, TELEGRAM_TOKEN, configured_env

CORE_GATES = {
    "real_mcp_catalog_has_required_primitives",
    "two_real_context_strategies_compared",
    "raw_model_usage_latency_receipts",
    "sync_async_message_cancel_status_lifecycle",
    "hitl_pending_response_and_conservative_timeout",
    "receipt_chain_verifies",
    "privacy_canary_absent_from_model_requests",
    "no_secret_in_bundle",
    "timers_fire_and_cancel",
    "subagent_used_governed_tool",
}


def campaign_env(baton_env: dict[str, str], fake_llm: FakeLLMServer) -> dict[str, str]:
    fake_llm.when("taxonomy", Behavior(delay_seconds=60))
    fake_llm.when("GOVERNED-TOOL-CASE", governed_script())
    env = {
        **baton_env,
        "COLLAB_PROVIDER": "moonshot",
        "OPENAI_MODEL": "kimi-k3",
        "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY,
        "OPENAI_BASE_URL": fake_llm.base_url,
    }
    env.pop("BATON_HOME")
    return env


def run_campaign(
    env: dict[str, str],
    cwd: Path,
    *args: str,
    stdin: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = subprocess.run(
        [sys.executable, "-m", "baton", "campaign", "run", "--campaign-id", "c1", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        input=stdin,
    )
    return done, cwd / "validation" / "c1"


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


#: The built-in tools every campaign run calls (and whose recorded results are checked against their schemas).
CAMPAIGN_TOOLS = {
    "mcp_spawn_subagent",
    "mcp_send_message_to_subagent",
    "mcp_get_subagent_status",
    "mcp_cancel_subagent",
    "mcp_request_admin_approval",
    "mcp_list_pending_requests",
    "mcp_respond_to_request",
    "mcp_send_email",
    "mcp_send_telegram_message",
    "mcp_send_slack_message",
    "mcp_set_timer",
    "mcp_list_timers",
    "mcp_cancel_timer",
    "mcp_list_adapters",
}


def assert_results_match_the_listed_schemas(run_dir: Path) -> set[str]:
    """Every recorded result of a built-in tool validates against the ``outputSchema`` in ``catalog.json``;
    returns the tools checked."""
    catalog = json.loads((run_dir / "catalog.json").read_text())
    schemas = {tool["name"]: tool["outputSchema"] for tool in catalog["schemas"] if "outputSchema" in tool}
    checked = set()
    for path in sorted((run_dir / "receipts").glob("*.json")):
        row = json.loads(path.read_text())
        if row["tool"] in schemas:
            jsonschema.validate(row["payload"], schemas[row["tool"]])
            checked.add(row["tool"])
    return checked


def test_with_nothing_delivered_the_campaign_is_blocked_not_failed(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    done, run_dir = run_campaign(campaign_env(baton_env, fake_llm), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = summary(run_dir)
    assert result["status"] == "blocked", result["blockers"]
    assert result["model"] == {"provider": "moonshot", "name": "kimi-k3", "source": "configured provider"}
    assert set(result["blockers"]) == {
        "real_human_decision",
        "real_email_notification",
        "real_im_notification",
        "real_slack_notification",
    }
    assert all(result["gates"][gate] for gate in CORE_GATES)
    assert verify_bundle(run_dir) == []
    assert "PRIVATE-MARKER-MUST-BE-FILTERED" not in fake_llm.all_request_text()
    latest = json.loads((tmp_path / "validation" / "latest.json").read_text())
    assert latest["campaign_id"] == "c1"
    assert latest["status"] == "blocked"
    files = {entry["path"] for entry in json.loads((run_dir / "manifest.json").read_text())["files"]}
    assert {
        "protocol.json",
        "catalog.json",
        "llm_receipts.json",
        "summary.json",
        "receipts_chain.json",
    } <= files
    assert any(path.startswith("receipts/") and path.endswith("_hitl_timeout.json") for path in files)
    assert assert_results_match_the_listed_schemas(run_dir) == CAMPAIGN_TOOLS
    assert_checkpoints_anchor_the_bundle(run_dir, tmp_path / "validation" / ".c1.home", tmp_path)

    (run_dir / "receipts" / "01_minimal_sync.json").write_text("{}\n")
    verified = run_cli(baton_env, "campaign", "verify", str(run_dir))
    assert verified.returncode == 1
    assert "01_minimal_sync.json" in verified.stderr


def test_with_every_channel_on_loopback_the_campaign_passes(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    with SMTPReceiver(username=SMTP_USERNAME, password=SMTP_PASSWORD) as smtp, WebhookReceiver() as web:
        env = {**campaign_env(baton_env, fake_llm), **configured_env(smtp, web, tmp_path / "unused")}
        env.pop("BATON_HOME")
        done, run_dir = run_campaign(
            env,
            tmp_path,
            "--real-notifications",
            "--interactive-human",
            "--human-timeout-seconds",
            "3600",
            stdin="APPROVE: looks right\n",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert smtp.wait_for(1)
    result = summary(run_dir)
    assert result["status"] == "passed", result["blockers"]
    assert result["publication_authorized"] is True
    assert assert_results_match_the_listed_schemas(run_dir) == CAMPAIGN_TOOLS
    decision = json.loads((run_dir / "human_decision.json").read_text())
    assert decision["admin_notes"] == "looks right"
    bundle_text = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    for secret in (TELEGRAM_TOKEN, SMTP_PASSWORD, FAKE_MOONSHOT_KEY):
        assert secret not in bundle_text
    assert "HITL_REQUEST=" in done.stdout


def test_an_interactive_rejection_is_recorded(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    done, run_dir = run_campaign(
        campaign_env(baton_env, fake_llm),
        tmp_path,
        "--interactive-human",
        "--human-timeout-seconds",
        "3600",
        stdin="REJECT: no\n",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    decision = json.loads((run_dir / "human_decision.json").read_text())
    assert decision["approved"] is False
    assert decision["admin_notes"] == "no"
    assert decision["mcp_result"]["approved"] is False
    result = summary(run_dir)
    assert result["gates"]["real_human_decision"] is True
    assert result["publication_authorized"] is False


def test_a_broken_provider_fails_the_campaign_with_its_blockers(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.default = Behavior(status=500)
    done, run_dir = run_campaign(campaign_env(baton_env, fake_llm), tmp_path)
    assert done.returncode == 1
    result = summary(run_dir)
    assert result["status"] == "failed"
    assert {
        "two_real_context_strategies_compared",
        "raw_model_usage_latency_receipts",
        "sync_async_message_cancel_status_lifecycle",
    } <= set(result["blockers"])


def test_real_notifications_refuse_to_start_unconfigured(baton_env: dict[str, str], tmp_path: Path) -> None:
    done, run_dir = run_campaign(baton_env, tmp_path, "--real-notifications")
    assert done.returncode == 1
    assert "campaign_config_incomplete" in done.stderr
    assert not run_dir.exists()


def test_status_classification_reserves_blocked_for_external_gates() -> None:
    gates = {"core": True, "real_email_notification": False, "real_human_decision": False}
    assert classify_status(gates, interactive_human=False) == "blocked"
    assert classify_status(gates, interactive_human=True) == "failed"
    assert classify_status({**gates, "core": False}, interactive_human=False) == "failed"
    assert classify_status(dict.fromkeys(gates, True), interactive_human=True) == "passed"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("APPROVE", (True, "No additional notes supplied by the live human operator.")),
        ("reject: not now ", (False, "not now")),
        ("  Approve : ok", (True, "ok")),
    ],
)
def test_human_decision_lines_parse(line: str, expected: tuple[bool, str]) -> None:
    assert parse_human_decision(line) == expected


def test_other_human_lines_are_refused() -> None:
    with pytest.raises(ValueError, match="APPROVE or REJECT"):
        parse_human_decision("yes please")


def test_with_no_provider_the_campaign_stops_before_starting_anything(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    done, _run_dir = run_campaign(baton_env, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("provider_not_configured: ")
    assert "COLLAB_PROVIDER" in done.stderr
    assert "MOONSHOT_API_KEY" in done.stderr
    assert "--loopback-model" in done.stderr
    assert len(done.stderr.splitlines()) <= 5
    assert done.stdout == ""
    assert not (tmp_path / "validation").exists()


def test_a_provider_without_its_key_is_named_before_starting(
    baton_env: dict[str, str], tmp_path: Path
) -> None:
    done, run_dir = run_campaign({**baton_env, "COLLAB_PROVIDER": "anthropic"}, tmp_path)
    assert done.returncode == 1
    assert "ANTHROPIC_API_KEY" in done.stderr
    assert not run_dir.exists()


def test_a_provider_error_on_the_first_spawn_stops_the_run_with_that_error(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.default = Behavior(status=401)
    done, run_dir = run_campaign(campaign_env(baton_env, fake_llm), tmp_path)
    assert done.returncode == 1
    assert "stopped at minimal_sync: provider_http_error" in done.stderr
    result = summary(run_dir)
    assert result["status"] == "failed"
    assert result["stopped"]["error_class"] == "provider_http_error"
    assert result["tool_call_count"] == 1
    assert not any("async_status" in path.name for path in (run_dir / "receipts").iterdir())


def assert_checkpoints_anchor_the_bundle(run_dir: Path, home: Path, tmp_path: Path) -> None:
    """The server home is private, the bundle carries the shutdown checkpoint, and a bundle rewritten
    to drop the newest receipts (manifest recomputed) fails against the server's public key."""
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "baton.db").stat().st_mode) == 0o600
    chain = json.loads((run_dir / "receipts_chain.json").read_text())
    anchors = json.loads((run_dir / "receipts_checkpoints.json").read_text())
    assert anchors["checkpoints"][-1]["seq"] == len(chain)
    trusted = read_public_key(home / "keys" / "checkpoint.pub")
    assert verify_bundle(run_dir, trusted) == []
    forged = tmp_path / "forged"
    shutil.copytree(run_dir, forged)
    text = json.dumps(chain[:-3], ensure_ascii=False, indent=2) + "\n"
    (forged / "receipts_chain.json").write_text(text)
    manifest = json.loads((forged / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "receipts_chain.json":
            entry.update(bytes=len(text.encode()), sha256=hashlib.sha256(text.encode()).hexdigest())
    (forged / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_bundle(forged, trusted)
    assert len(problems) == 1
    assert "receipt_checkpoint_mismatch" in problems[0]
