"""Settings: empty means unset, defaults hold, credentials are collected for redaction."""

from __future__ import annotations

from baton.config import load_settings


def test_empty_and_blank_values_take_the_default() -> None:
    settings = load_settings(
        {"HITL_TIMEOUT_SECONDS": "", "BROWSER_HEADLESS": " ", "COLLAB_PROVIDER": "", "SLACK_WEBHOOK_URL": ""}
    )
    assert settings.hitl_timeout_seconds == 300
    assert settings.browser_headless is True
    assert settings.collab_provider is None
    assert settings.slack_webhook_url is None


def test_values_are_parsed_and_unknown_variables_ignored() -> None:
    settings = load_settings({"HITL_TIMEOUT_SECONDS": "2", "BROWSER_HEADLESS": "false", "PATH": "/bin"})
    assert settings.hitl_timeout_seconds == 2
    assert settings.browser_headless is False


def test_sensitive_values_are_the_configured_credentials_longest_first() -> None:
    settings = load_settings(
        {
            "OPENAI_API_KEY": "sk-short-but-real-1234",
            "SMTP_PASSWORD": "hunter2",
            "OPENAI_MODEL": "gpt-4o-mini",
        }
    )
    assert settings.sensitive_values() == ("sk-short-but-real-1234", "hunter2")
