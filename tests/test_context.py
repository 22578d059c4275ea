"""The privacy filter and the context strategies' pure parts."""

from __future__ import annotations

import json

import pytest

from baton.errors import SubagentError
from baton.subagents.context import (
    PrivacyFilter,
    assert_no_leak,
    render_context,
    select_slice,
    subagent_system_prompt,
)
from baton.subagents.remembered import scrub_requests


def test_private_keys_and_credential_shaped_values_are_removed_at_any_depth() -> None:
    context = {
        "customer": "Ada",
        "private_note": "PRIVATE-MARKER-MUST-BE-FILTERED",
        "account": {"api_key": "whatever", "plan": "pro", "notes": ["ok", "sk-abcdefghijklmnop1234"]},
        "Session-Token": "abc",
        "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "author": "Grace",
    }
    filtered = PrivacyFilter().apply(context)
    assert filtered.value == {
        "customer": "Ada",
        "account": {"plan": "pro", "notes": ["ok"]},
        "author": "Grace",
    }
    assert sorted(filtered.filtered_fields) == [
        "Session-Token",
        "account.api_key",
        "account.notes[1]",
        "jwt",
        "private_note",
    ]
    assert "PRIVATE-MARKER-MUST-BE-FILTERED" in filtered.removed_values


def test_extra_private_key_fragments_come_from_configuration() -> None:
    privacy = PrivacyFilter.from_settings("diagnosis, salary", ())
    filtered = privacy.apply({"Diagnosis": "flu", "salary_band": "B", "city": "Oslo"})
    assert filtered.value == {"city": "Oslo"}


def test_configured_secret_values_are_removed_wherever_they_appear() -> None:
    privacy = PrivacyFilter.from_settings(None, ("hunter2-long-secret",))
    filtered = privacy.apply({"comment": "password is hunter2-long-secret", "ok": "fine"})
    assert filtered.value == {"ok": "fine"}


def test_minimal_slice_keeps_only_the_named_dotted_paths() -> None:
    context = {"policy": "7 days", "order": {"id": 7, "total": 80, "lines": [1]}, "customer": "Ada"}
    assert select_slice(context, ["policy", "order.total", "missing.path"]) == {
        "policy": "7 days",
        "order": {"total": 80},
    }
    assert select_slice(context, None) == {}


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a."])
def test_malformed_slice_paths_are_rejected(path: str) -> None:
    with pytest.raises(SubagentError) as caught:
        select_slice({"a": 1}, [path])
    assert caught.value.error_class == "context_slice_invalid"


def test_a_removed_value_in_prepared_text_fails_closed() -> None:
    with pytest.raises(SubagentError) as caught:
        assert_no_leak("customer Ada, note PRIVATE-MARKER", ["PRIVATE-MARKER"])
    assert caught.value.error_class == "context_privacy_violation"
    assert_no_leak("customer Ada", ["PRIVATE-MARKER", "abc"])


def test_empty_context_renders_as_empty_text() -> None:
    assert render_context({}) == ""
    assert '"policy": "x"' in render_context({"policy": "x"})


@pytest.mark.parametrize("role", ["assistant", "analyst", "code reviewer", "SRE on call"])
def test_the_system_prompt_names_any_role_in_a_sentence_that_reads_right(role: str) -> None:
    prompt = subagent_system_prompt(role, "")
    assert prompt.startswith(f"Your role: {role}. ")
    assert " a assistant" not in prompt and " a analyst" not in prompt
    assert "Context:" not in prompt
    assert subagent_system_prompt(role, "the facts").endswith("\n\nContext:\nthe facts")


def test_a_header_cell_naming_private_data_hides_its_column_in_every_tabular_shape() -> None:
    privacy = PrivacyFilter()
    shown = privacy.filter_result(
        {
            "grid": [["Report"], ["customer", "Private-Notes"], ["ACME", "CANARY-GRID"], ["Globex"]],
            "duck": {
                "columns": ["id", "creditCard"],
                "columnTypes": ["INTEGER", "VARCHAR"],
                "rows": [[1, "4111-1"]],
            },
            "schema": {"fields": [{"name": "id"}, {"name": "SSN"}], "data": [[7, "078-05-1120"]]},
            "cells": [
                {"row": 1, "column": 2, "value": "api key"},
                {"row": 2, "column": 2, "value": "CANARY-CELL"},
            ],
            "addressed": {"B1": "Secret", "B2": "CANARY-ADDRESSED", "A2": "ACME"},
            "pairs": [{"name": "DB_PASSWORD", "value": "CANARY-PAIR"}, {"name": "region", "value": "eu"}],
            "aligned": "   customer  private_notes\n0  ACME      CANARY-ALIGNED\n",
            "elsewhere": "a later mention of CANARY-GRID",
        }
    )
    text = str(shown)
    assert "CANARY" not in text and "4111-1" not in text and "078-05-1120" not in text
    assert shown["duck"]["columnTypes"] == ["INTEGER", "VARCHAR"]  # it describes the columns: kept
    assert shown["grid"][1] == ["customer", "Private-Notes"] and shown["grid"][3] == ["Globex"]
    assert shown["pairs"][1] == {"name": "region", "value": "eu"}
    assert shown["addressed"]["A2"] == "ACME"


def test_a_value_removed_once_is_removed_from_later_results_in_its_escaped_forms_too() -> None:
    privacy = PrivacyFilter()
    remembered = privacy.apply({"private_notes": 'CANARY "quoted"', "ok": 1}).remembered()
    later = privacy.filter_result(
        {
            "text": 'csv: "CANARY ""quoted"""',
            "json": json.dumps({"n": 'CANARY "quoted"'}),
            "raw": 'CANARY "quoted"',
        },
        remembered,
    )
    assert "CANARY" not in json.dumps(later)


def test_prose_with_commas_and_a_table_without_private_columns_pass_unchanged() -> None:
    privacy = PrivacyFilter()
    prose = "We met, talked, and left.\nThe plan: ship on Friday, then rest.\n"
    table = "| customer | plan |\n|---|---|\n| ACME | pro |\n"
    assert privacy.filter_result(prose) == prose
    assert privacy.filter_result(table) == table


@pytest.mark.parametrize(
    "text",
    [
        "id,name,private_notes\n1,ACME,CANARY, with a comma\n2,Globex\n",
        "customer|Private Notes\nACME|CANARY-PIPE",
        "<table><tr><th>Customer</th><th>SECRET</th></tr><tr><td>ACME</td><td><i>CANARY</i></td></tr></table>",
        "Customer: ACME\nPrivate notes: CANARY-LABEL\n- api_key = CANARY-KEY",
        "customer;Credit Card\r\nACME;CANARY-SEMICOLON\r\n",
        'Result: [["customer", "private_notes"], ["ACME", "CANARY-EMBEDDED"]] (1 row)',
        "Rows: [{'customer': 'ACME', 'private_notes': 'CANARY-REPR-IN-TEXT'}]",
        "customer=ACME private_notes=CANARY-LOGFMT plan=pro",
        "<row><customer>ACME</customer><private_notes>CANARY-XML</private_notes></row>",
        "customer: ACME\nprivate_notes: |\n  CANARY-YAML\n  more of it\nplan: pro",
        "| Field | Value |\n|---|---|\n| private_notes | CANARY-FIELD |\n| customer | ACME |",
    ],
)
def test_a_private_column_written_as_text_is_filtered_however_it_is_written(text: str) -> None:
    shown = PrivacyFilter().filter_result(text)
    assert "CANARY" not in shown and "ACME" in shown and "[filtered]" in shown


def test_a_table_of_fields_hides_the_value_of_a_private_field_and_nothing_else() -> None:
    shown = PrivacyFilter().filter_result(
        [["field", "value"], ["private_notes", "CANARY"], ["customer", "ACME"]]
    )
    assert shown == [["field", "value"], ["private_notes", "[filtered]"], ["customer", "ACME"]]


def test_a_spawn_remembers_tens_of_thousands_of_removed_cells_and_finds_them_in_one_pass() -> None:
    privacy = PrivacyFilter()
    rows = [["id", "private_notes"], *([i, f"note number {i:05d}"] for i in range(20_000))]
    remembered = privacy.apply({"sheet": rows}).remembered()
    later = privacy.filter_result(
        {"text": "see note number 01234 and note number 19999, not 20000"}, remembered
    )
    assert later == {"text": "see [filtered] and [filtered], not 20000"}


def test_the_last_net_removes_remembered_values_from_every_part_a_model_request_sends() -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolReturnPart, UserPromptPart

    remembered = PrivacyFilter().apply({"private_notes": "CANARY-NET"}).remembered()
    messages = [
        ModelRequest(parts=[UserPromptPart(content="task: CANARY-NET")]),
        ModelResponse(parts=[TextPart(content="calling")]),
        ModelRequest(parts=[ToolReturnPart(tool_name="t", content={"n": ["CANARY-NET"]}, tool_call_id="1")]),
    ]
    scrub_requests(messages, remembered)
    assert "CANARY" not in repr(messages)
