"""One readiness line of ``baton doctor``: shared by :mod:`baton.ops.doctor` and :mod:`baton.ops.service_checks`,
so that the doctor imports its checks and no check imports the doctor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One readiness line."""

    name: str
    ok: bool
    detail: str
