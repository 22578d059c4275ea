"""``baton install CLIENT`` in a temporary HOME: creation, merge, idempotence, dry-run, and never a secret."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from baton.ops.install import config_path
from tests.cli_process import run_cli
from tests.conftest import FAKE_MOONSHOT_KEY


@pytest.fixture
def home_env(baton_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "user"
    home.mkdir()
    env = {**baton_env, "HOME": str(home), "MOONSHOT_API_KEY": FAKE_MOONSHOT_KEY}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("APPDATA", None)
    return env


def install(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(env, "install", *args)


def assert_launches_this_baton(entry: dict) -> None:
    command = Path(entry["command"])
    assert command.is_absolute()
    assert command.name == "baton"
    assert os.access(command, os.X_OK)
    assert entry["args"] == ["serve"]


def test_dry_run_prints_the_config_with_the_absolute_path_and_touches_nothing(
    home_env: dict[str, str],
) -> None:
    home = Path(home_env["HOME"])
    for client, key in (("claude-desktop", "mcpServers"), ("cursor", "mcpServers"), ("vscode", "servers")):
        done = install(home_env, client, "--dry-run")
        assert done.returncode == 0, done.stderr
        entry = json.loads(done.stdout)[key]["baton"]
        assert_launches_this_baton(entry)
        assert entry["env"]["COLLAB_PROVIDER"] == "moonshot"
        assert "nothing was written" in done.stderr
    assert list(home.rglob("*")) == []


def test_claude_code_prints_the_claude_mcp_add_line(home_env: dict[str, str]) -> None:
    done = install(home_env, "claude-code", "--dry-run")
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("claude mcp add baton --scope user ")
    assert '--env MOONSHOT_API_KEY="$MOONSHOT_API_KEY"' in line
    command = line.split(" -- ", 1)[1].split()[0]
    assert Path(command).is_absolute() and Path(command).name == "baton"
    assert FAKE_MOONSHOT_KEY not in done.stdout + done.stderr


def test_claude_code_run_calls_claude_without_a_secret(home_env: dict[str, str], tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    fake = bin_dir / "claude"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**home_env, "PATH": f"{bin_dir}{os.pathsep}{home_env['PATH']}"}
    done = install(env, "claude-code", "--run")
    assert done.returncode == 0, done.stderr
    argv = json.loads(record.read_text())
    assert argv[:5] == ["mcp", "add", "baton", "--scope", "user"]
    assert "MOONSHOT_API_KEY=<set MOONSHOT_API_KEY>" in argv
    assert Path(argv[argv.index("--") + 1]).is_absolute()
    assert FAKE_MOONSHOT_KEY not in json.dumps(argv)


def test_install_creates_the_file_with_placeholders_never_the_secret(home_env: dict[str, str]) -> None:
    done = install(home_env, "cursor")
    assert done.returncode == 0, done.stderr
    path = Path(home_env["HOME"]) / ".cursor" / "mcp.json"
    text = path.read_text()
    assert FAKE_MOONSHOT_KEY not in text
    entry = json.loads(text)["mcpServers"]["baton"]
    assert_launches_this_baton(entry)
    assert entry["env"]["MOONSHOT_API_KEY"] == "<set MOONSHOT_API_KEY>"
    assert "MOONSHOT_API_KEY" in done.stderr
    assert [p.name for p in path.parent.iterdir()] == ["mcp.json"]


def test_install_merges_keeps_a_backup_and_is_idempotent(home_env: dict[str, str]) -> None:
    path = Path(home_env["HOME"]) / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    original = {"globalShortcut": "Ctrl+Space", "mcpServers": {"other": {"command": "/usr/bin/other"}}}
    path.write_text(json.dumps(original))
    assert install(home_env, "claude-desktop").returncode == 0
    merged = json.loads(path.read_text())
    assert merged["globalShortcut"] == "Ctrl+Space"
    assert merged["mcpServers"]["other"] == {"command": "/usr/bin/other"}
    assert_launches_this_baton(merged["mcpServers"]["baton"])
    backups = sorted(path.parent.glob("claude_desktop_config.json.baton-backup-*"))
    assert len(backups) == 1
    assert json.loads(backups[0].read_text()) == original

    # the user fills the key in; a second install changes nothing and keeps it
    merged["mcpServers"]["baton"]["env"]["MOONSHOT_API_KEY"] = "filled-by-the-user"
    path.write_text(json.dumps(merged, indent=2) + "\n")
    before = path.read_bytes()
    again = install(home_env, "claude-desktop")
    assert again.returncode == 0, again.stderr
    assert "already holds this entry" in again.stderr
    assert path.read_bytes() == before
    assert len(list(path.parent.glob("*.baton-backup-*"))) == 1


def test_vscode_uses_servers_and_prompts_for_the_key(home_env: dict[str, str]) -> None:
    assert install(home_env, "vscode").returncode == 0
    path = Path(home_env["HOME"]) / ".config" / "Code" / "User" / "mcp.json"
    document = json.loads(path.read_text())
    assert "mcpServers" not in document
    entry = document["servers"]["baton"]
    assert entry["type"] == "stdio"
    assert entry["env"]["MOONSHOT_API_KEY"] == "${input:baton-moonshot-api-key}"
    assert document["inputs"] == [
        {
            "type": "promptString",
            "id": "baton-moonshot-api-key",
            "description": "MOONSHOT_API_KEY for baton",
            "password": True,
        }
    ]
    assert install(home_env, "vscode").returncode == 0
    assert json.loads(path.read_text()) == document


def test_a_config_that_is_not_json_is_left_untouched(home_env: dict[str, str]) -> None:
    path = Path(home_env["HOME"]) / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    done = install(home_env, "cursor")
    assert done.returncode == 1
    assert "client_config_invalid" in done.stderr
    assert path.read_text() == "{ not json"


def test_config_locations_follow_each_clients_convention(monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path("/home/ada")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("APPDATA", "C:/Users/ada/AppData/Roaming")
    assert config_path("claude-desktop", home, "darwin") == (
        home / "Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert config_path("claude-desktop", home, "win32") == Path(
        "C:/Users/ada/AppData/Roaming/Claude/claude_desktop_config.json"
    )
    assert config_path("claude-desktop", home, "linux") == home / ".config/Claude/claude_desktop_config.json"
    assert config_path("cursor", home, "darwin") == home / ".cursor/mcp.json"
    assert config_path("vscode", home, "darwin") == home / "Library/Application Support/Code/User/mcp.json"
    assert config_path("vscode", home, "linux") == home / ".config/Code/User/mcp.json"
    assert config_path("claude-code", home, "linux") == home / ".claude.json"
