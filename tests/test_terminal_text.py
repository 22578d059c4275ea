"""The one sanitizer for agent text on a terminal: every character a terminal acts on is shown escaped."""

from __future__ import annotations

import json

from baton.terminal_text import printable, printable_json, printable_value

HOSTILE = "a\x1b[2K\x07\r\n\t\x7f\x85\x9b\u200b\u202e\u2066\u2028\ufeff\U000e0001 é 漢 🙂 [b]x[/b]"


def test_controls_bidi_and_separators_are_escaped_and_visible_text_is_kept() -> None:
    assert printable(HOSTILE) == (
        "a\\x1b[2K\\x07\\r\\n\\t\\x7f\\x85\\x9b\\u200b\\u202e\\u2066\\u2028\\ufeff\\U000e0001 é 漢 🙂 [b]x[/b]"
    )
    assert printable("plain text, (ok) [not markup]") == "plain text, (ok) [not markup]"


def test_json_output_stays_the_same_data_without_a_character_a_terminal_acts_on() -> None:
    value = {"message": HOSTILE, "nested": [HOSTILE]}
    text = printable_json(value)
    assert json.loads(text) == value
    assert printable(text.replace("\n", "")) == text.replace("\n", "")  # only the layout's line breaks
    assert "\\u202e" in text and "\\udb40\\udc01" in text and "é 漢 🙂" in text


def test_a_cell_is_one_line_whatever_the_value() -> None:
    assert printable_value({"k": "v\nw\x1b"}) == '{"k": "v\\nw\\u001b"}'
    assert printable_value("two\nlines") == "two\\nlines"
