"""The CLI against the same store a server uses."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.cli_process import run_cli
from tests.conftest import FAKE_MOONSHOT_KEY


def seed_receipts(env: dict[str, str], count: int) -> Path:
    code = (
        "from baton.runtime import Runtime\n"
        "rt = Runtime.open()\n"
        f"for n in range({count}): rt.receipts.append('test', {{'n': n}})\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    return Path(env["BATON_HOME"]) / "baton.db"


def test_receipts_verify_passes_then_names_a_tampered_receipt(baton_env: dict[str, str]) -> None:
    database = seed_receipts(baton_env, 3)
    ok = run_cli(baton_env, "receipts", "verify")
    assert ok.returncode == 0, ok.stderr
    assert "3 receipts" in ok.stdout
    listed = json.loads(run_cli(baton_env, "receipts", "list", "--json", "--oldest").stdout)
    assert [row["payload"]["n"] for row in listed] == [0, 1, 2]
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE receipts SET payload = '{\"n\":7}' WHERE seq = 2")
    broken = run_cli(baton_env, "receipts", "verify")
    assert broken.returncode == 1
    assert "receipt_chain_broken" in broken.stderr
    assert "seq 2" in broken.stderr


def test_doctor_reports_readiness_without_secrets(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "COLLAB_PROVIDER": "moonshot", "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY}
    done = run_cli(env, "doctor", "--json")
    assert done.returncode == 0, done.stderr
    checks = {row["name"]: row for row in json.loads(done.stdout)}
    assert checks["store"]["ok"] is True
    assert checks["model provider"]["ok"] is True
    assert "kimi-k3" in checks["model provider"]["detail"]
    assert FAKE_MOONSHOT_KEY not in done.stdout + done.stderr


def test_subagent_commands_report_unknown_ids(baton_env: dict[str, str]) -> None:
    listed = run_cli(baton_env, "subagents", "list", "--json")
    assert json.loads(listed.stdout) == []
    shown = run_cli(baton_env, "subagents", "show", "sa_missing")
    assert shown.returncode == 1
    assert "subagent_not_found" in shown.stderr


def test_doctor_refuses_what_serve_http_refuses(baton_env: dict[str, str]) -> None:
    same = "one-token-for-both-0123456789abcdefXYZ"
    equal = run_cli({**baton_env, "BATON_HTTP_TOKEN": same, "BATON_ADMIN_TOKEN": same}, "doctor", "--json")
    row = next(r for r in json.loads(equal.stdout) if r["name"] == "http")
    assert row["ok"] is False and "config_invalid" in row["detail"] and same not in equal.stdout
    weak = run_cli({**baton_env, "BATON_HTTP_TOKEN": "changeme"}, "doctor", "--json")
    row = next(r for r in json.loads(weak.stdout) if r["name"] == "http")
    assert (
        row["ok"] is True
        and row["detail"].startswith("loopback only; beyond it: ")
        and "changeme" not in weak.stdout
    )


def _help_texts(command: object, path: str) -> list[tuple[str, str]]:
    """Every help text of ``command`` and its sub-commands: the command's own and each parameter's."""
    texts = [(path, getattr(command, "help", None) or "")]
    texts += [(f"{path} {p.name}", getattr(p, "help", None) or "") for p in getattr(command, "params", [])]
    for name, sub in getattr(command, "commands", {}).items():
        texts += _help_texts(sub, f"{path} {name}")
    return texts


def test_every_help_text_is_shown_as_written() -> None:
    """``--help`` renders help as rich markup, which eats a bracket it takes for a tag (``[@VERSION]``
    vanished from ``gateway lock``); a bracket meant literally is escaped."""
    import typer.main
    from rich.markup import render

    from baton.cli import app

    texts = _help_texts(typer.main.get_command(app), "baton")
    assert len(texts) > 100
    eaten = [(where, text) for where, text in texts if render(text).plain != text.replace("\\[", "[")]
    assert eaten == []
