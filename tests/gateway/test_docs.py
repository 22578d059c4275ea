"""The gateway's error classes and observed contract are documented."""

from __future__ import annotations

from pathlib import Path

from baton.errors import ERROR_CLASSES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_registered_error_class_is_in_the_error_class_doc() -> None:
    text = (DOCS / "error-classes.md").read_text(encoding="utf-8")
    missing = [name for name in ERROR_CLASSES if f"`{name}`" not in text]
    assert missing == [], "run: python -m baton.errors > docs/error-classes.md"


def test_the_gateway_doc_names_the_reference_hashes() -> None:
    text = (DOCS / "gateway.md").read_text(encoding="utf-8")
    for name in ("tool_name_set_sha256", "tool_schema_manifest_sha256", "tool_definition_sha256", "ratio"):
        assert name in text
