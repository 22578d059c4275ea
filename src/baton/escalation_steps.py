"""Escalation steps of a request: their text form, parsed strictly, and the plan of when each fires.

One grammar serves the operator's default (``BATON_HITL_ESCALATION``) and a request's own steps (the
``escalation`` argument of ``mcp_request_admin_approval`` / ``mcp_request_admin_input``): steps separated
by commas, each one of

* ``N:TARGET`` — after N seconds without a decision, notify TARGET (an escalation);
* ``remind:N`` or ``remind:N:TARGET`` — N seconds before the request expires, remind TARGET (default
  ``all``) that it still waits.

TARGET is a notification channel (``email``, ``telegram``, ``slack``, ``discord``, ``webhook``), ``all``
(every configured channel, as the announcement) or ``person:NAME`` (the notify destination of a person,
``baton people notify NAME DEST``). Nothing here touches the store or the network; see
:mod:`baton.hitl.escalation` for the steps' timers and their firing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

#: The notification channels a step may name (the same names as :data:`baton.notify.channels.CHANNELS`,
#: repeated here because the settings parse steps and the notify package reads the settings).
CHANNELS: tuple[str, ...] = ("email", "telegram", "slack", "discord", "webhook")
ALL = "all"
PERSON_PREFIX = "person:"
#: At most this many steps in one text (the operator's default and a request's own, each).
MAX_STEPS = 10
#: The longest text of steps a request or the setting may give.
MAX_TEXT = 1000
_SECONDS = re.compile(r"^[1-9][0-9]{0,7}$")
_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

StepKind = Literal["escalate", "remind"]


class StepSyntaxError(ValueError):
    """A text of steps that does not follow the grammar; the message says which step and why."""


@dataclass(frozen=True)
class Step:
    """One step: ``escalate`` ``seconds`` after creation, or ``remind`` ``seconds`` before expiry."""

    kind: StepKind
    seconds: int
    target: str

    @property
    def person(self) -> str | None:
        """The person a step names (``person:NAME``), else None."""
        return self.target[len(PERSON_PREFIX) :] if self.target.startswith(PERSON_PREFIX) else None

    def text(self) -> str:
        """The step in the grammar's text form."""
        return (
            f"{self.seconds}:{self.target}"
            if self.kind == "escalate"
            else f"remind:{self.seconds}:{self.target}"
        )


@dataclass(frozen=True)
class PlannedStep:
    """A step placed on a request's clock: it fires ``offset_seconds`` after the request was created."""

    step: Step
    offset_seconds: float
    #: ``operator`` (BATON_HITL_ESCALATION) or ``request`` (the request's own ``escalation``).
    source: Literal["operator", "request"]


def parse_steps(text: str | None) -> tuple[Step, ...]:
    """The steps of a text (empty or None: none); anything else than the grammar is a StepSyntaxError."""
    if text is None or not text.strip():
        return ()
    if len(text) > MAX_TEXT:
        raise StepSyntaxError(f"The steps are longer than {MAX_TEXT} characters.")
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > MAX_STEPS:
        raise StepSyntaxError(f"At most {MAX_STEPS} steps may be given (got {len(parts)}).")
    return tuple(_parse_one(part, index) for index, part in enumerate(parts, start=1))


def _parse_one(part: str, index: int) -> Step:
    head, _, rest = part.partition(":")
    if head == "remind":
        seconds, _, target = rest.partition(":")
        return Step("remind", _seconds(seconds, index, part), _target(target or ALL, index, part))
    return Step("escalate", _seconds(head, index, part), _target(rest, index, part))


def _seconds(text: str, index: int, part: str) -> int:
    if not _SECONDS.match(text):
        raise StepSyntaxError(
            f"Step {index} ({part!r}) needs a whole number of seconds from 1 to 99999999, as in "
            "'600:slack' or 'remind:60'."
        )
    return int(text)


def _target(text: str, index: int, part: str) -> str:
    if text in CHANNELS or text == ALL:
        return text
    if text.startswith(PERSON_PREFIX) and _PERSON.match(text[len(PERSON_PREFIX) :]):
        return text
    raise StepSyntaxError(
        f"Step {index} ({part!r}) names no target: use one of {', '.join(CHANNELS)}, {ALL} or person:NAME."
    )


def plan(default: tuple[Step, ...], requested: tuple[Step, ...], timeout_seconds: int) -> list[PlannedStep]:
    """When each step fires on a request open ``timeout_seconds``, in firing order.

    The operator's steps that would fall at or after the expiry are left out (a short request simply has
    fewer); a request's own step that would is refused, since the agent asked for something that cannot
    happen (:class:`StepSyntaxError`).
    """
    planned: list[PlannedStep] = []
    for source, steps in (("operator", default), ("request", requested)):
        for step in steps:
            offset = step.seconds if step.kind == "escalate" else timeout_seconds - step.seconds
            if 0 < offset < timeout_seconds:
                planned.append(PlannedStep(step, float(offset), source))  # type: ignore[arg-type]
            elif source == "request":
                raise StepSyntaxError(
                    f"The step {step.text()!r} would fire at or after the request expires "
                    f"({timeout_seconds} s from now); give a time inside the timeout."
                )
    return sorted(planned, key=lambda item: item.offset_seconds)
