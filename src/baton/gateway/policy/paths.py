"""Canonical path arguments: what a call policy judges is what the server receives.

A policy that says "writes only under ``/data/out/``" must not be passed by ``/data/out/../x``,
``/data/out//x/``, a decomposed Unicode form or a symlink inside a mount. So, before any check, every
argument that is a path is rewritten to its canonical form, and the call goes upstream with exactly
the arguments the Cedar policy (and an approval, and the receipt's hash) saw.

An argument is a path when it is a string (at any depth, or an item of a list) and either

- its property's last word (split at ``_``, ``-`` and camelCase) is a path word (:data:`PATH_WORDS`:
  ``path``, ``filePath``, ``paths``, ``dir``, ``source``, ``destination``…) and it holds no line break
  (a multi-line ``source`` is content, not a path); or
- it starts with one ``/`` (not ``//``, a scheme-relative URL) and holds no whitespace and no glob
  character (``*?[]{}``): an absolute path under any name.

Canonical means: Unicode NFC; ``.``, empty segments (``//``) and a trailing ``/`` dropped; ``..``
applied lexically; and, for a path under one of the adapter's mounts, symlinks resolved on the host
side of the mount and mapped back to the sandbox path. A path holding a control character (NUL
included) is refused (``invalid_arguments``). A path **escapes** when a ``..`` climbs above the mount
it named (or above ``/``, or above the working directory for a relative path) or a symlink leads out
of its mount; the call policy sees that as ``context.path_escapes``.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.errors import GatewayError
from baton.gateway.policy.policy_runtime import Mount

#: The last word of a property name that makes its string value a path.
PATH_WORDS = frozenset(
    {
        *("path", "paths", "filepath", "filepaths", "filename", "filenames", "cwd"),
        *("dir", "dirs", "directory", "directories", "folder", "folders"),
        *("source", "sources", "destination", "destinations", "src", "dest", "dst"),
    }
)
#: Characters that make a string under another name a pattern rather than a path.
GLOB = frozenset("*?[]{}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@dataclass(frozen=True)
class CanonicalCall:
    """A call's arguments with every path canonical, and whether any path left its root."""

    arguments: dict[str, Any]
    path_escapes: bool = False


def is_path_name(name: str | None) -> bool:
    """Whether a property called ``name`` holds a path (its last word is a path word)."""
    if not name:
        return False
    words = _WORDS.findall(name)
    return bool(words) and words[-1].lower() in PATH_WORDS


def _is_path(name: str | None, value: str) -> bool:
    if is_path_name(name):
        return "\n" not in value and "\r" not in value
    unnamed = value.startswith("/") and not value.startswith("//")  # not a scheme-relative URL
    return unnamed and not any(ch.isspace() or ch in GLOB for ch in value)


def _lexical(value: str, mounts: Sequence[Mount]) -> tuple[str, bool, Mount | None]:
    """``value`` with ``.``, ``//`` and ``..`` applied, whether a ``..`` climbed above its anchor, and the
    mount the result lies in."""
    absolute = value.startswith("/")
    roots = {tuple(p for p in m.sandbox.split("/") if p): m for m in mounts} if absolute else {}
    parts: list[str] = []
    floor, escapes = 0, False
    for segment in value.split("/"):
        if segment in ("", "."):
            continue
        if segment != "..":
            parts.append(segment)
            if tuple(parts) in roots:
                floor = max(floor, len(parts))
        elif parts and parts[-1] != "..":
            escapes = escapes or len(parts) <= floor  # climbing out of the mount the path named
            parts.pop()
            floor = min(floor, len(parts))
        else:  # above ``/`` (which stays ``/``) or above a relative path's working directory
            escapes = True
            if not absolute:
                parts.append("..")
    text = ("/" if absolute else "") + "/".join(parts)
    inside = next((m for root, m in roots.items() if tuple(parts[: len(root)]) == root), None)
    return text or ("." if value else ""), escapes, inside


def _through_host(canonical: str, mount: Mount) -> tuple[str, bool]:
    """The path with symlinks resolved on the mount's host side, mapped back; escapes when they lead out."""
    rest = canonical[len(mount.sandbox) :].lstrip("/")
    host_root = os.path.realpath(mount.host)
    real = os.path.realpath(os.path.join(mount.host, rest) if rest else mount.host)
    if real != host_root and not real.startswith(host_root.rstrip("/") + "/"):
        return canonical, True
    inside = real[len(host_root) :].lstrip("/")
    return (mount.sandbox + "/" + inside) if inside else mount.sandbox, False


def canonical_path(value: str, mounts: Sequence[Mount] = ()) -> tuple[str, bool]:
    """One path's canonical form and whether it escapes its root; a control character is refused."""
    if _CONTROL.search(value):
        raise GatewayError(
            "invalid_arguments",
            "A path argument holds a control character (NUL, a tab, an escape…); the call is refused.",
        )
    text, escapes, mount = _lexical(unicodedata.normalize("NFC", value), mounts)
    if mount is not None:
        text, leaves = _through_host(text, mount)
        escapes = escapes or leaves
    return text, escapes


def canonical_arguments(arguments: dict[str, Any], mounts: Sequence[Mount] = ()) -> CanonicalCall:
    """The call's arguments with each path argument canonical (what is judged and what is sent)."""
    escapes = False

    def walk(value: Any, name: str | None) -> Any:
        nonlocal escapes
        if isinstance(value, dict):
            return {key: walk(item, key) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, name) for item in value]
        if isinstance(value, str) and _is_path(name, value):
            text, leaves = canonical_path(value, mounts)
            escapes = escapes or leaves
            return text
        return value

    return CanonicalCall(walk(arguments, None), escapes)
