"""The whole dependency closure of a candidate, as lock pins it: one record for either ecosystem.

Each ecosystem's resolver fills it (:mod:`baton.gateway.lock.npm_closure`, :mod:`baton.gateway.lock.pypi_closure`);
drafting, the bundle writer and lock read it, so it depends on neither resolver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from baton.gateway.lock.registries import Fetched


@dataclass
class Closure:
    """Everything lock pins for one candidate."""

    ecosystem: str
    root: Fetched
    fetched: list[Fetched]
    lockfile: bytes | None = None
    requirements: bytes | None = None
    skipped_optional: list[str] = field(default_factory=list)
    without_install_scripts: list[str] = field(default_factory=list)
    weak_integrity: list[str] = field(default_factory=list)
