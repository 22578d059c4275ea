"""``baton install CLIENT``: put this ``baton`` into an MCP client's config, by absolute path, with no secret.

Each client keeps its MCP servers in a JSON file at a documented place (Claude Desktop's
``claude_desktop_config.json``, Cursor's ``~/.cursor/mcp.json``, VS Code's user ``mcp.json``);
Claude Code is configured through its own ``claude mcp add``. baton merges one entry into that
file, keeps every other key, writes a backup of the previous file beside it, and writes nothing
when the entry is already there. Secret values are never written: a key appears as the
placeholder ``<set NAME>`` (VS Code: a password prompt, ``${input:…}``) for the user to fill, and
a value the user already filled in is kept on the next install.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from baton.errors import ConfigError

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")
#: The key that holds the servers in each client's file (VS Code's format says "servers").
SERVERS_KEY = {"claude-desktop": "mcpServers", "cursor": "mcpServers", "vscode": "servers"}
#: The variables each provider still needs from the user (secrets or values only they know).
PROVIDER_SECRETS = {
    "moonshot": ("MOONSHOT_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "ollama": (),
    "openai-compatible": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
}


def placeholder(name: str) -> str:
    """What stands in a config for a value only the user may fill."""
    return f"<set {name}>"


@dataclass
class Plan:
    """What ``baton install`` writes (or would write) for one client."""

    client: str
    command: str
    args: list[str]
    env: dict[str, str]
    to_fill: list[str]
    path: Path | None = None
    before: str | None = None
    after: str | None = None
    claude_argv: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the file would change."""
        return self.path is not None and self.before != self.after


def baton_executable() -> str:
    """The absolute path of the ``baton`` running now (clients often do not inherit the shell's PATH)."""
    invoked = Path(sys.argv[0])
    if invoked.name in ("baton", "baton.exe") and invoked.exists():
        return str(invoked.absolute())
    beside = Path(sys.executable).parent / ("baton.exe" if os.name == "nt" else "baton")
    if beside.exists():
        return str(beside.absolute())
    found = shutil.which("baton")
    if found:
        return str(Path(found).absolute())
    raise ConfigError("config_invalid", "Cannot find the baton executable; install baton with pip first.")


def config_path(client: str, home: Path | None = None, platform: str | None = None) -> Path:
    """The user-level MCP config file of ``client`` on this platform, per the client's documentation."""
    home = home or Path.home()
    platform = platform or sys.platform
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "claude-code":
        return home / ".claude.json"
    app = {"claude-desktop": "Claude", "vscode": "Code"}[client]
    if platform == "darwin":
        base = home / "Library" / "Application Support" / app
    elif platform.startswith("win"):
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / app
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / app
    if client == "claude-desktop":
        return base / "claude_desktop_config.json"
    return base / "User" / "mcp.json"


def server_env(provider: str, model: str | None) -> tuple[dict[str, str], list[str]]:
    """The entry's environment (provider and model set, secrets as placeholders) and the names to fill."""
    from baton.models.providers import DEFAULT_MODELS, PROVIDERS

    if provider not in PROVIDERS:
        raise ConfigError("provider_unknown", f"--provider must be one of {', '.join(PROVIDERS)}.")
    env = {"COLLAB_PROVIDER": provider}
    chosen = model or DEFAULT_MODELS.get(provider)
    if chosen:
        env["OPENAI_MODEL"] = chosen
    secrets = list(PROVIDER_SECRETS[provider])
    if not chosen:
        secrets.append("OPENAI_MODEL")
    env.update({name: placeholder(name) for name in secrets})
    return env, secrets


def plan(
    client: str,
    *,
    provider: str = "moonshot",
    model: str | None = None,
    name: str = "baton",
    path: Path | None = None,
    command: str | None = None,
) -> Plan:
    """Everything ``baton install`` would do for ``client``; touches nothing."""
    if client not in CLIENTS:
        raise ConfigError("config_invalid", f"The client must be one of {', '.join(CLIENTS)}.")
    command = command or baton_executable()
    env, to_fill = server_env(provider, model)
    result = Plan(client, command, ["serve"], env, to_fill)
    if client == "claude-code":
        result.claude_argv = ["claude", "mcp", "add", name, "--scope", "user"]
        for key, value in env.items():
            result.claude_argv += ["--env", f"{key}={value}"]
        result.claude_argv += ["--", command, "serve"]
        return result
    result.path = path or config_path(client)
    result.before = result.path.read_text(encoding="utf-8") if result.path.is_file() else None
    document = _load(result.path, result.before)
    servers_key = SERVERS_KEY[client]
    servers = document.setdefault(servers_key, {})
    if not isinstance(servers, dict):
        raise ConfigError("client_config_invalid", f"{result.path}: {servers_key!r} is not an object.")
    servers[name] = _entry(client, command, env, servers.get(name), to_fill)
    if client == "vscode":
        _merge_inputs(document, to_fill)
    result.after = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    return result


def _load(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "client_config_invalid", f"{path} is not valid JSON (line {exc.lineno}); it was left untouched."
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(
            "client_config_invalid", f"{path} does not hold a JSON object; it was left untouched."
        )
    return document


def _entry(
    client: str, command: str, env: dict[str, str], existing: Any, to_fill: list[str]
) -> dict[str, Any]:
    """Our server entry; a value the user already put in place of a placeholder is kept."""
    values = dict(env)
    if client == "vscode":
        values.update({name: f"${{input:{_input_id(name)}}}" for name in to_fill})
    old_env = existing.get("env") if isinstance(existing, dict) else None
    if isinstance(old_env, dict):
        for key in to_fill:
            old = old_env.get(key)
            if isinstance(old, str) and old and old != placeholder(key):
                values[key] = old
    entry: dict[str, Any] = {"command": command, "args": ["serve"], "env": values}
    return {"type": "stdio", **entry} if client == "vscode" else entry


def _input_id(name: str) -> str:
    return "baton-" + name.lower().replace("_", "-")


def _merge_inputs(document: dict[str, Any], to_fill: list[str]) -> None:
    """VS Code asks for each secret once (``promptString``, ``password``) and stores it itself."""
    inputs = document.setdefault("inputs", [])
    if not isinstance(inputs, list):
        raise ConfigError("client_config_invalid", "'inputs' is not a list.")
    known = {item.get("id") for item in inputs if isinstance(item, dict)}
    for name in to_fill:
        if _input_id(name) not in known:
            inputs.append(
                {
                    "type": "promptString",
                    "id": _input_id(name),
                    "description": f"{name} for baton",
                    "password": name != "OPENAI_BASE_URL",
                }
            )


def apply(result: Plan) -> Path | None:
    """Write the planned file (backup first); returns the backup's path, or None when nothing changed."""
    if result.path is None or result.after is None or not result.changed:
        return None
    result.path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if result.before is not None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        backup = result.path.with_name(f"{result.path.name}.baton-backup-{stamp}")
        shutil.copy2(result.path, backup)
    temporary = result.path.with_name(f".{result.path.name}.baton-tmp")
    temporary.write_text(result.after, encoding="utf-8")
    os.replace(temporary, result.path)
    return backup


def claude_line(result: Plan) -> str:
    """The ``claude mcp add`` line to paste in a shell: secrets come from the shell's own variables."""
    argv = list(result.claude_argv)
    words = []
    for word in argv:
        key, sep, value = word.partition("=")
        if sep and key in result.to_fill and value == placeholder(key):
            words.append(f'{key}="${key}"')
        else:
            words.append(shlex.quote(word))
    return " ".join(words)


def run_claude(result: Plan) -> int:
    """Run ``claude mcp add`` (secrets passed as placeholders: fill them with ``claude mcp`` afterwards)."""
    import subprocess

    from baton.errors import BatonError

    executable = shutil.which("claude")
    if executable is None:
        raise BatonError(
            "client_command_failed", "The claude command is not on PATH; paste the printed line instead."
        )
    done = subprocess.run([executable, *result.claude_argv[1:]], check=False)
    if done.returncode != 0:
        raise BatonError("client_command_failed", f"claude mcp add exited with status {done.returncode}.")
    return done.returncode
