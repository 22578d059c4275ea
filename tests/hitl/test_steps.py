"""The escalation steps' grammar and plan (no store, no network)."""

from __future__ import annotations

import pytest

from baton.config import load_settings
from baton.errors import ConfigError
from baton.escalation_steps import CHANNELS, Step, StepSyntaxError, parse_steps, plan
from baton.notify import channels


def test_the_steps_name_the_notify_channels() -> None:
    assert CHANNELS == channels.CHANNELS


def test_a_text_parses_into_escalations_and_reminders() -> None:
    assert parse_steps(" 600:slack , 900:person:ada.l, remind:60, remind:30:email ") == (
        Step("escalate", 600, "slack"),
        Step("escalate", 900, "person:ada.l"),
        Step("remind", 60, "all"),
        Step("remind", 30, "email"),
    )
    assert parse_steps("") == parse_steps(None) == parse_steps("  ") == ()


@pytest.mark.parametrize(
    "text",
    [
        "600",
        "600:",
        "0:slack",
        "-5:slack",
        "1.5:slack",
        "600:sms",
        "remind",
        "remind:0",
        "remind:60:sms",
        "600:person:",
        "600:person:a b",
        "600:slack,",
        ",".join(["1:slack"] * 11),
        "9" * 9 + ":slack",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(StepSyntaxError):
        parse_steps(text)


def test_a_bad_operator_default_is_config_invalid_naming_the_variable() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({"BATON_HITL_ESCALATION": "600:slack,soon:email"})
    assert refused.value.error_class == "config_invalid"
    assert refused.value.details["variables"] == ["BATON_HITL_ESCALATION"]
    assert "Step 2 ('soon:email') needs a whole number of seconds" in refused.value.message
    assert "Value error" not in refused.value.message
    assert load_settings({"BATON_HITL_ESCALATION": "600:slack"}).escalation_steps == (
        Step("escalate", 600, "slack"),
    )


def test_the_plan_orders_steps_and_drops_operator_steps_that_cannot_fire() -> None:
    default = parse_steps("600:slack,remind:60,7200:email")
    planned = plan(default, parse_steps("30:person:ada"), 900)
    assert [(p.step.target, p.offset_seconds, p.source) for p in planned] == [
        ("person:ada", 30.0, "request"),
        ("slack", 600.0, "operator"),
        ("all", 840.0, "operator"),
    ]
    assert plan(default, (), 60) == []  # a short request simply has fewer steps
    with pytest.raises(StepSyntaxError):
        plan(default, parse_steps("remind:900"), 900)  # the request's own step cannot fire: refused
