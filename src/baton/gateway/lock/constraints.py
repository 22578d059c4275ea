"""Operator constraints on a closure the ecosystem's resolver picks.

A package's own ranges sometimes admit a newer release of a dependency that no longer works with it
(``mcp>=1`` admitting an ``mcp`` without an API the server calls). A constraint narrows what the resolver
may pick without adding a package: PyPI constraints are PEP 508 requirements passed to uv as a constraints
file, npm constraints are ``NAME@RANGE`` written as npm ``overrides``. They are recorded in the policy
(``resolution.constraints``), so they are covered by its hash and shown with it.
"""

from __future__ import annotations

import re

from baton.errors import GatewayError
from baton.gateway.lock import npm_resolve
from baton.gateway.policy.policy import CONSTRAINT_PATTERN, MAX_CONSTRAINT_LENGTH, MAX_CONSTRAINTS


def normalize(ecosystem: str, constraints: list[str]) -> list[str]:
    """Each constraint checked for ``ecosystem`` and written in one canonical form; sorted, no repeats."""
    if len(constraints) > MAX_CONSTRAINTS:
        raise GatewayError(
            "adapter_candidate_invalid", f"At most {MAX_CONSTRAINTS} constraints are accepted."
        )
    parse = _pypi if ecosystem == "pypi" else _npm
    parsed = {parse(text.strip()) for text in constraints}  # (package name, canonical form)
    if len({name for name, _ in parsed}) != len(parsed):
        raise GatewayError("adapter_candidate_invalid", "Give one constraint per package.")
    return sorted(text for _, text in parsed)


def _refuse(text: str, why: str) -> GatewayError:
    return GatewayError("adapter_candidate_invalid", f"Constraint {text[:MAX_CONSTRAINT_LENGTH]!r} {why}")


def _pypi(text: str) -> tuple[str, str]:
    from packaging.requirements import InvalidRequirement, Requirement

    if not re.fullmatch(CONSTRAINT_PATTERN, text):
        raise _refuse(text, "is not a requirement such as 'mcp<2'.")
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        raise _refuse(text, f"is not a PEP 508 requirement: {str(error)[:200]}") from None
    if requirement.url or requirement.extras or requirement.marker is not None:
        raise _refuse(text, "may only name a package and versions (no URL, extras or markers).")
    if not str(requirement.specifier):
        raise _refuse(text, "names no versions.")
    from packaging.utils import canonicalize_name

    name = canonicalize_name(requirement.name)
    return name, f"{name}{requirement.specifier}"


def _npm(text: str) -> tuple[str, str]:
    if not re.fullmatch(CONSTRAINT_PATTERN, text):
        raise _refuse(text, "is not NAME@RANGE such as 'content-type@^1'.")
    at = text.rfind("@")
    if at <= 0:
        raise _refuse(text, "is not NAME@RANGE such as 'content-type@^1'.")
    name, spec = text[:at], text[at + 1 :]
    npm_resolve.check_spec(name, spec)
    return name, f"{name}@{spec}"


def npm_overrides(constraints: list[str]) -> dict[str, str]:
    """npm's ``overrides`` object for normalized npm constraints."""
    return dict(text.rpartition("@")[::2] for text in constraints)
