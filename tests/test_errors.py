"""Error classes: registered, documented, and turned into results in one shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.errors import ERROR_CLASSES, BatonError, SubagentError, error_classes_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "error-classes.md"


def test_the_error_class_doc_is_generated_from_the_registry() -> None:
    assert DOCS.read_text(encoding="utf-8") == error_classes_markdown(), (
        "run: python -m baton.errors > docs/error-classes.md"
    )


def test_every_error_class_is_stable_snake_case() -> None:
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name) for name in ERROR_CLASSES)


def test_the_spec_error_classes_are_all_registered() -> None:
    spec = {
        "provider_not_configured",
        "subagent_not_found",
        "subagent_already_terminal",
        "context_privacy_violation",
        "hitl_timeout",
        "notification_not_configured",
        "artifact_tarball_checksum_mismatch",
        "artifact_archive_path_invalid",
        "mcp_protocol_response_timeout",
        "mcp_tool_contract_mismatch",
        "mcp_adapter_tool_partition_mismatch",
        "adapter_policy_expired",
        "sandbox_unavailable",
    }
    assert spec <= set(ERROR_CLASSES)


def test_an_unregistered_class_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unregistered"):
        BatonError("made_up_class", "x")


def test_a_failure_result_has_success_error_and_class() -> None:
    result = SubagentError("subagent_not_found", "No subagent has id 'x'.", subagent_id="x").to_result()
    assert result == {
        "success": False,
        "error": "No subagent has id 'x'.",
        "error_class": "subagent_not_found",
        "subagent_id": "x",
    }
