"""The operator's screen: ``gateway list`` at 80 columns (piped and on a terminal) keeps every id whole and
one line per plain adapter; ``promote`` prints a summary with the detail behind ``--json``."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.gateway.policy.policy_files import parse_policy, write_policy
from baton.testing.gateway_adapter import policy_document
from tests.cli_process import run_gateway
from tests.pty_screen import screen_of

#: Twelve adapters with ids as long as real ones (``modelcontextprotocol-server-…``), two with details.
IDS = [f"modelcontextprotocol-server-filesystem-{n:02d}" for n in range(12)]


@pytest.fixture
def home(baton_env: dict[str, str]) -> Path:
    """A BATON_HOME holding twelve drafted adapters; one mounts a directory, one narrows its resolver."""
    home = Path(baton_env["BATON_HOME"])
    for index, adapter_id in enumerate(IDS):
        extra: dict[str, object] = {}
        if index == 3:
            extra["mounts"] = [{"host": "/srv/notes/a-rather-long-directory-name", "sandbox": "/data"}]
        document = policy_document(adapter_id, b"tarball", **extra)
        if index == 5:
            document["resolution"] = {"constraints": ["content-type@^1", "mime-types@^2"]}
        write_policy(home / "adapters" / f"{adapter_id}.toml", parse_policy(document))
    return home


def check_layout(text: str) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    words = {word for line in lines for word in line.split()}
    assert set(IDS) <= words, "every id is shown whole, on one line"
    assert len(lines) <= 1 + len(IDS) + 2, lines  # a header, one line each, two detail lines
    assert any(line.startswith("  mounts: /srv/notes/a-rather-long-directory-name -> /data") for line in lines)
    assert any(line.startswith("  constraints: content-type@^1, mime-types@^2") for line in lines)


def test_gateway_list_fits_80_columns_on_a_pipe(home: Path, baton_env: dict[str, str]) -> None:
    done = run_gateway({**baton_env, "COLUMNS": "80"}, "list")
    assert done.returncode == 0, done.stderr
    check_layout(done.stdout)


def test_gateway_list_fits_80_columns_on_a_terminal(home: Path, baton_env: dict[str, str]) -> None:
    screen = screen_of(baton_env, "gateway", "list", columns=80, rows=60)
    check_layout(screen)
