"""Drafting an adapter policy from a fetched closure: entrypoint, pins, resolution, next versions."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from baton import clock
from baton.evidence.receipts import sha256_hex
from baton.gateway.lock import node_runtime
from baton.gateway.lock.bundle_writer import resolution_contents
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.registries import Fetched
from baton.gateway.policy import checks
from baton.gateway.policy.policy import Artifact, Identity, Interpreter, Policy, Resolution
from baton.gateway.policy.policy_runtime import RuntimeSpec


def artifact_rows(fetched: list[Fetched]) -> list[dict[str, Any]]:
    """The policy's artifact rows for a fetched set."""
    rows = []
    for item in fetched:
        row: dict[str, Any] = {
            "ecosystem": item.ecosystem,
            "name": item.name,
            "version": item.version,
            "sha512": item.sha512_hex,
        }
        if item.ecosystem == "pypi":
            row |= {"sha256": item.sha256, "filename": item.filename}
        rows.append(row)
    return rows


def wheel_targets(root: Fetched) -> list[str]:
    """``module:function`` of each of the root wheel's console scripts (its own name first)."""
    import configparser
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(root.content)) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
            text = wheel.read(names[0]).decode("utf-8", "replace") if names else ""
    except (zipfile.BadZipFile, OSError, KeyError):
        return []
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    scripts = dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}
    ordered = [scripts[root.name]] if root.name in scripts else []
    targets = [t.split("[", 1)[0].strip() for t in [*ordered, *scripts.values()]]
    return list(dict.fromkeys(t for t in targets if checks.MODULE_TARGET.fullmatch(t)))


def _wheel_entry(root: Fetched) -> str:
    """The root wheel's console script (its own name first), else its module."""
    return next(iter(wheel_targets(root)), root.name.replace("-", "_"))


def _npm_entry(root: Fetched) -> str:
    """The root package's bin (the one named like the package first), else its directory (main)."""
    short = root.name.rsplit("/", 1)[-1]
    script = root.bin.get(short) or next(iter(root.bin.values()), "")
    script = script.removeprefix("./").strip()
    if not script or ".." in script.split("/"):
        return f"node_modules/{root.name}"
    return f"node_modules/{root.name}/{script}"


def draft_policy(
    adapter_id: str,
    candidate: str,
    resolved: Closure,
    arguments: list[str],
    pin: dict[str, str] | None,
    allow_without_scripts: list[str],
    constraints: list[str] | None = None,
) -> Policy:
    """A draft policy: closure pinned, interpreter pinned, runtime locked down, contract still to observe."""
    root = resolved.root
    if root.ecosystem == "npm":
        entrypoint = node_runtime.entrypoint_for(["node", _npm_entry(root)], pin)
    else:
        entrypoint = ["python3", "-I", "-S", "baton_boot.py", _wheel_entry(root)]
    files = resolution_contents(resolved)
    return Policy(
        adapter=Identity(
            id=adapter_id,
            candidate=candidate,
            risk_class="high",
            owner="unassigned",
            expires_at=(clock.now() + timedelta(days=90)).replace(microsecond=0).isoformat(),
        ),
        artifacts=[Artifact.model_validate(row) for row in artifact_rows(resolved.fetched)],
        runtime=RuntimeSpec(entrypoint=entrypoint, arguments=arguments),
        resolution=Resolution(
            allow_without_install_scripts=sorted(set(allow_without_scripts)),
            constraints=list(constraints or []),
            npm_lockfile_sha256=_sha(files.get("package-lock.json")),
            pypi_requirements_sha256=_sha(files.get("requirements.txt")),
            skipped_optional=resolved.skipped_optional,
        ),
        interpreter=Interpreter.model_validate(pin) if pin else None,
    )


def _sha(content: bytes | None) -> str | None:
    return sha256_hex(content) if content is not None else None


def default_adapter_id(name: str) -> str:
    """``@playwright/mcp`` to ``playwright-mcp``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64] or "adapter"


def next_version(previous: Policy, drafted: Policy) -> Policy:
    """The drafted candidate as the next version of ``previous``: its owner, runtime settings (mounts,
    env, network, limits), client, tool and serving choices are kept; artifacts, entrypoint, resolution and
    interpreter are the new draft's, and the contract is unpinned until a replay records it."""
    runtime = previous.runtime.model_copy(
        update={"entrypoint": drafted.runtime.entrypoint, "arguments": drafted.runtime.arguments}
    )
    adapter = previous.adapter.model_copy(update={"candidate": drafted.adapter.candidate})
    return drafted.model_copy(
        update={
            "adapter": adapter,
            "runtime": runtime,
            "client": previous.client,
            "tools": previous.tools.model_copy(update={"denied": []}),
            "serving": previous.serving,
            "contract": None,
        }
    )
