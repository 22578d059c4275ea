"""An agent's text never drives the operator's terminal: ``baton hitl list|show|watch|approve`` and
``baton receipts list`` on a real pseudo-terminal drawn by a terminal emulator, and on a pipe."""

from __future__ import annotations

import json

import anyio
import pytest

from baton.hitl.broker import HitlBroker, NewRequest
from baton.runtime import Runtime
from tests.cli_process import run_cli
from tests.pty_screen import screen_of

pytestmark = pytest.mark.anyio

#: Erase the line, go to its start, draw a routine line over the dangerous one (issue 44).
HIDDEN = "DROP DATABASE prod\x1b[2K\x1b[1000DRotate the nginx access logs (routine)"
#: Set the window title, ring the bell, reverse the text after it (RLO), a C1 control, rich markup.
NOISY = {"note": "\x1b]0;pwned\x07 \u202eoot \x9b31m [bold red]loud[/bold red]"}


async def _ask(broker: HitlBroker) -> str:
    view = await broker.create(NewRequest("approval", HIDDEN + "\nsecond line", NOISY, 3600))
    return str(view["request_id"])


async def test_hitl_list_show_and_watch_on_a_terminal_show_the_hidden_text(
    baton_env: dict[str, str], broker: HitlBroker
) -> None:
    request_id = await _ask(broker)
    for args in (("hitl", "list"), ("hitl", "show", request_id), ("hitl", "show", request_id, "--json")):
        screen = await anyio.to_thread.run_sync(lambda args=args: screen_of(baton_env, *args))
        assert "DROP DATABASE prod" in screen, (args, screen)
        assert "\\x1b[2K" in screen or "\\u001b[2K" in screen, (args, screen)
    watched = await anyio.to_thread.run_sync(
        lambda: screen_of(baton_env, "hitl", "watch", until=lambda screen: "(expires" in screen)
    )
    assert "DROP DATABASE prod\\x1b[2K\\x1b[1000DRotate" in watched, watched
    shown = await anyio.to_thread.run_sync(lambda: screen_of(baton_env, "hitl", "show", request_id))
    assert "\\u202eoot" in shown and "\\x9b31m" in shown and "[bold red]loud[/bold red]" in shown, shown


async def test_piped_listings_escape_the_agents_controls_and_keep_one_row_per_line(
    baton_env: dict[str, str], broker: HitlBroker
) -> None:
    request_id = await _ask(broker)
    listed = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and lines[1].startswith(request_id), listed.stdout  # the newline did not split it
    assert "DROP DATABASE prod\\x1b[2K\\x1b[1000DRotate" in lines[1]
    assert "(routine) second line" in lines[1]  # the title: markdown's soft line break reads as a space
    shown = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id)
    as_json = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id, "--json")
    for output in (listed.stdout, shown.stdout, as_json.stdout):
        assert not any(char in output for char in "\x1b\x07\u202e\x9b\r"), output
    assert "[bold red]loud[/bold red]" in shown.stdout
    assert json.loads(as_json.stdout)["context"] == NOISY  # escaped, not changed


#: An agent's markdown, and the plain title every list shows for it (issue 44).
MARKDOWN = "**Deploy** the [release](http://x) to `prod`"
TITLE = "Deploy the release to prod"


async def test_lists_and_watch_show_a_markdown_message_as_its_plain_title_and_show_its_source(
    baton_env: dict[str, str], broker: HitlBroker
) -> None:
    view = await broker.create(NewRequest("approval", MARKDOWN, timeout_seconds=3600))
    request_id = str(view["request_id"])
    listed = await anyio.to_thread.run_sync(lambda: screen_of(baton_env, "hitl", "list"))
    watched = await anyio.to_thread.run_sync(
        lambda: screen_of(baton_env, "hitl", "watch", until=lambda screen: "(expires" in screen)
    )
    piped = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "list")
    assert piped.returncode == 0, piped.stderr
    for output in (listed, watched, piped.stdout):
        assert TITLE in output and "**" not in output and "](" not in output, output
    assert f"new approval {request_id}: {TITLE} (expires" in watched, watched
    assert piped.stdout.splitlines()[0].split()[4] == "title", piped.stdout
    for shown in (
        await anyio.to_thread.run_sync(lambda: screen_of(baton_env, "hitl", "show", request_id)),
        (await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", request_id)).stdout,
    ):
        assert "message (markdown source)" in shown and MARKDOWN in shown, shown


async def test_receipts_and_errors_never_carry_an_agents_controls(
    baton_env: dict[str, str], runtime: Runtime
) -> None:
    runtime.receipts.append("test", {"m": HIDDEN, **NOISY})
    for args in (("receipts", "list"), ("receipts", "list", "--json")):
        screen = await anyio.to_thread.run_sync(lambda args=args: screen_of(baton_env, *args))
        assert "DROP DATABASE prod" in screen and "\u202e" not in screen, (args, screen)
        piped = await anyio.to_thread.run_sync(run_cli, baton_env, *args)
        assert not any(char in piped.stdout for char in "\x1b\x07\u202e\x9b"), piped.stdout
    refused = await anyio.to_thread.run_sync(run_cli, baton_env, "hitl", "show", "hr_\x1b[2Kx\u202e")
    assert refused.returncode == 1 and "hr_\\x1b[2Kx\\u202e" in refused.stderr, refused.stderr


async def test_a_timer_an_agent_named_lists_on_one_row_with_its_controls_escaped(
    baton_env: dict[str, str], runtime: Runtime
) -> None:
    from baton.timers.service import TimerRequest, TimerService

    name = "DROP DATABASE prod\x1b[2K\x1b[1000Dnightly\nbackup"
    TimerService(runtime).set(TimerRequest(name=name, action={"kind": "record"}, delay_seconds=3600))
    piped = await anyio.to_thread.run_sync(run_cli, baton_env, "timers", "list")
    lines = piped.stdout.splitlines()
    assert len(lines) == 2 and "DROP DATABASE prod\\x1b[2K\\x1b[1000Dnightly\\nbackup" in lines[1], (
        piped.stdout
    )
    screen = await anyio.to_thread.run_sync(lambda: screen_of(baton_env, "timers", "list"))
    assert "DROP DATABASE prod" in screen, screen
