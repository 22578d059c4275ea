"""The reference controller's policy checks, generalized: entrypoint and argument allow-lists, and
no destructive tool allowed without a human approval unless the owner says so by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy.policy import Policy

#: Verbs that make a tool destructive when they start its name or stand as a word in it.
DESTRUCTIVE_VERBS = (
    "write", "delete", "remove", "rm", "exec", "execute", "run", "kill", "drop", "move", "create",
    "update", "edit", "overwrite", "truncate", "destroy", "purge", "erase", "rename", "upload", "install",
    "uninstall", "shell", "eval", "modify", "terminate", "wipe", "push", "commit", "merge", "deploy",
    "publish", "replace",
)  # fmt: skip
WORD = re.compile(r"[a-z]+")
NODE_FLAGS = frozenset(
    {"--no-warnings", "--enable-source-maps", "--no-deprecation", "--disable-proto=delete"}
)
PYTHON_FLAGS = frozenset({"-I", "-S", "-u", "-B", "-E", "-s"})
MODULE_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?::[A-Za-z_][A-Za-z0-9_.]*)?$")
SCRIPT_PATH = re.compile(r"^(?:node_modules|site-packages)/[A-Za-z0-9@._/~+-]{1,1024}$")
MAX_ARGUMENTS = 64
MAX_ARGUMENT_CHARS = 4096


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return WORD.findall(spaced.lower())


def destructive_reason(name: str, annotations: dict[str, Any] | None) -> str | None:
    """Why a tool counts as destructive, or None (``readOnlyHint: true`` outweighs a verb in the name)."""
    annotations = annotations if isinstance(annotations, dict) else {}
    if annotations.get("destructiveHint") is True:
        return "its annotations say destructiveHint: true"
    if annotations.get("readOnlyHint") is True:
        return None
    verbs = [word for word in _words(name) if word in DESTRUCTIVE_VERBS]
    return f"its name says {verbs[0]!r}" if verbs else None


def check_destructive_tools(policy: Policy, definitions: Iterable[dict[str, Any]] = ()) -> None:
    """Refuse an allowed destructive tool that needs no approval and is not explicitly exempted."""
    annotations = {str(d.get("name")): d.get("annotations") for d in definitions if isinstance(d, dict)}
    tools = policy.tools
    offending = []
    for name in tools.allowed:
        if name in tools.approval_required or name in tools.allow_destructive_without_approval:
            continue
        reason = destructive_reason(name, annotations.get(name))
        if reason:
            offending.append(f"{name} ({reason})")
    if offending:
        raise GatewayError(
            "adapter_destructive_tool_unapproved",
            f"Destructive tools are allowed without approval_required: {', '.join(offending)}. Put them in "
            "tools.approval_required, deny them, or name them in tools.allow_destructive_without_approval.",
            tools=[item.split(" ", 1)[0] for item in offending],
        )


def _script_ok(policy: Policy, script: str) -> bool:
    if not SCRIPT_PATH.fullmatch(script) or ".." in script.split("/"):
        return False
    if script.startswith("site-packages/"):
        return any(a.ecosystem == "pypi" for a in policy.artifacts)
    rest = script.removeprefix("node_modules/")
    return any(
        a.ecosystem == "npm" and (rest == a.name or rest.startswith(a.name + "/")) for a in policy.artifacts
    )


def check_entrypoint(policy: Policy) -> None:
    """The entrypoint is an interpreter running a file of a pinned package, or baton's python boot."""
    entrypoint = policy.runtime.entrypoint
    if policy.runtime.sandbox == "docker":
        return
    command = entrypoint[0].rsplit("/", 1)[-1]
    pinned = policy.interpreter
    if entrypoint[0].startswith("/") and (pinned is None or pinned.command != entrypoint[0]):
        raise GatewayError("entrypoint_not_allowlisted", f"{entrypoint[0]} is not the pinned interpreter.")
    rest = list(entrypoint[1:])
    if command in ("node", "nodejs"):
        while rest and rest[0] in NODE_FLAGS:
            rest.pop(0)
        ok = len(rest) == 1 and _script_ok(policy, rest[0])
    elif re.fullmatch(r"python3(?:\.[0-9]{1,2})?", command):
        while rest and rest[0] in PYTHON_FLAGS:
            rest.pop(0)
        boot = len(rest) == 2 and rest[0] == "baton_boot.py" and bool(MODULE_TARGET.fullmatch(rest[1]))
        module = len(rest) == 2 and rest[0] == "-m" and bool(MODULE_TARGET.fullmatch(rest[1]))
        ok = boot or module or (len(rest) == 1 and _script_ok(policy, rest[0]))
    else:
        ok = False
    if not ok:
        raise GatewayError(
            "entrypoint_not_allowlisted",
            f"The entrypoint {entrypoint!r} is not an allowed shape: node or python3 running a file of a "
            "pinned package (no -e/-c/--require), or baton's python boot with a module.",
        )


#: Host trees an argument may not point a server at (the sandbox shows some of them). /usr is not
#: one: a browser adapter names /usr/bin/chromium.
ARGUMENT_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/etc", "/root", "/boot", "/home", "/var", "/run")


def check_arguments(policy: Policy) -> None:
    """Arguments are bounded text without control characters or ``..``; no path into a system tree.

    Paths elsewhere (``/work``, ``/tmp``, a mount, a deliberately absent ``/nonexistent/browser``) are
    allowed: the sandbox holds nothing else.
    """
    arguments = policy.runtime.arguments
    if len(arguments) > MAX_ARGUMENTS:
        raise GatewayError("arguments_not_allowlisted", f"More than {MAX_ARGUMENTS} arguments.")
    for argument in arguments:
        if len(argument) > MAX_ARGUMENT_CHARS or any(c in argument for c in "\x00\n\r"):
            raise GatewayError(
                "arguments_not_allowlisted", "An argument is too long or holds control characters."
            )
        value = argument.split("=", 1)[1] if argument.startswith("--") and "=" in argument else argument
        if ".." in value.split("/"):
            raise GatewayError("arguments_not_allowlisted", f"The argument {argument!r} climbs with '..'.")
        if any(value == tree or value.startswith(tree + "/") for tree in ARGUMENT_SYSTEM_TREES):
            raise GatewayError(
                "arguments_not_allowlisted", f"The argument {argument!r} points the server at a system tree."
            )


def check_policy_rules(policy: Policy, definitions: Iterable[dict[str, Any]] = ()) -> None:
    """Every reference-controller rule over a policy (and the observed tool definitions, when known)."""
    check_entrypoint(policy)
    check_arguments(policy)
    check_destructive_tools(policy, definitions)
