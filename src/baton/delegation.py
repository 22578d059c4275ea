"""A delegation chain: agent -> subagent -> ..., each link the authority in force, hashed. Standard library only.

Every link names its principal (the agent at depth 0, then each subagent), its depth, the tools and
adapters it may use (None: the agent's own, whatever the server grants it), ``read_only``, the sha256 of
each Cedar argument predicate in force (its parents' and its own), its token and cost budgets, its
deadline, and the sha256 of the link before it. A link's ``sha256`` covers all of that in canonical JSON,
so a receipt that carries the chain carries exactly what was in force. The same subset check serves the
spawn (:func:`widening`) and the verifier (:func:`chain_problem`, from :mod:`baton.chain_verify`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

#: The error class of a chain whose delegation widens somewhere.
DELEGATION_WIDENS = "receipt_delegation_widens"

#: The fields a link holds besides its own ``sha256``.
LINK_FIELDS = (
    "principal",
    "depth",
    "tools",
    "adapters",
    "read_only",
    "predicates",
    "max_total_tokens",
    "max_cost_usd",
    "deadline",
    "prev_sha256",
)


def link_sha256(link: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a link's fields (its own ``sha256`` left out)."""
    body = {key: link.get(key) for key in LINK_FIELDS}
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_link(prev: Mapping[str, Any] | None, **fields: Any) -> dict[str, Any]:
    """A link after ``prev`` (None: the root), hashed; ``fields`` are the rest of :data:`LINK_FIELDS`."""
    link: dict[str, Any] = {key: fields.get(key) for key in LINK_FIELDS}
    link["depth"] = 0 if prev is None else int(prev["depth"]) + 1
    link["read_only"] = bool(fields.get("read_only"))
    link["predicates"] = list(fields.get("predicates") or [])
    link["prev_sha256"] = None if prev is None else prev["sha256"]
    link["sha256"] = link_sha256(link)
    return link


def _wider_set(before: Any, after: Any) -> bool:
    """Whether ``after`` holds a name ``before`` does not (``before`` None: anything is within it)."""
    if before is None:
        return False
    if not isinstance(after, list) or not isinstance(before, list):
        return True
    return not set(map(str, after)) <= set(map(str, before))


def _wider_limit(before: Any, after: Any) -> bool:
    """Whether the limit ``after`` is looser than ``before`` (None: no limit)."""
    if before is None:
        return False
    if after is None:
        return True
    if isinstance(before, str) or isinstance(after, str):
        return _instant(after) > _instant(before)
    return bool(after > before)


def _instant(text: Any) -> datetime:
    return datetime.fromisoformat(str(text))


def widening(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """How ``after`` holds more authority than ``before``, the link it was delegated from; None when it is
    a subset (every field as narrow or narrower)."""
    try:
        if after.get("depth") != int(before["depth"]) + 1:
            return "its depth is not one more than its parent's"
        for name in ("tools", "adapters"):
            if _wider_set(before.get(name), after.get(name)):
                return f"its {name} are not a subset of its parent's"
        if before.get("read_only") and not after.get("read_only"):
            return "it drops its parent's read_only"
        if _wider_set(after.get("predicates") or [], before.get("predicates") or []):
            return "it drops an argument predicate of its parent"
        for name in ("max_total_tokens", "max_cost_usd", "deadline"):
            if _wider_limit(before.get(name), after.get(name)):
                return f"its {name} is looser than its parent's"
    except (KeyError, TypeError, ValueError):
        return "a link is malformed"
    return None


def chain_problem(chain: Any) -> str | None:
    """Why a receipt's delegation chain does not hold (a link's hash, its link to the one before, or a
    widening), or None when every link is hashed, linked and a subset of the one before."""
    if not isinstance(chain, Sequence) or isinstance(chain, str) or not chain:
        return "the delegation chain is not a list of links"
    prev: Mapping[str, Any] | None = None
    for index, link in enumerate(chain):
        if not isinstance(link, Mapping) or link.get("sha256") != link_sha256(link):
            return f"delegation link {index} does not match its sha256"
        expected = None if prev is None else prev.get("sha256")
        if link.get("prev_sha256") != expected:
            return f"delegation link {index} does not link to the one before it"
        if prev is None and link.get("depth") != 0:
            return "the delegation chain does not start at depth 0"
        if prev is not None:
            wider = widening(prev, link)
            if wider is not None:
                return f"delegation link {index} ({link.get('principal')}) widens: {wider}"
        prev = link
    return None


def chain_of(payload: Any) -> Any:
    """The delegation chain a receipt's payload carries (itself, or under ``subagent``), or None."""
    if not isinstance(payload, Mapping):
        return None
    if "delegation" in payload:
        return payload["delegation"]
    subagent = payload.get("subagent")
    if isinstance(subagent, Mapping) and "delegation" in subagent:
        return subagent["delegation"]
    return None


class Ledger:
    """The link each subagent was spawned with (its ``subagent_spawned`` receipt), so every later receipt
    of it, and of its subagents, must carry that very link: a chain cannot be swapped for a wider one."""

    def __init__(self) -> None:
        self.links: dict[str, str] = {}

    def check(self, kind: Any, payload: Any) -> str | None:
        """Why the chain a receipt carries does not hold, or None (a receipt without one holds)."""
        chain = chain_of(payload)
        if chain is None:
            return None
        problem = chain_problem(chain)
        if problem is not None:
            return problem
        spawned = kind == "subagent_spawned"
        for link in chain[1:-1] if spawned else chain[1:]:
            known = self.links.get(str(link.get("principal")))
            if known is not None and known != link["sha256"]:
                return f"the delegation link of {link.get('principal')} is not the one it was spawned with"
        if spawned:
            self.links.setdefault(str(chain[-1].get("principal")), str(chain[-1]["sha256"]))
        return None
