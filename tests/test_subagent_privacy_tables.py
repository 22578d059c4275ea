"""A private column's cells never reach a subagent's model, through ``python -m baton serve``.

The upstream is the stdlib test MCP server, locked, replayed in its sandbox and promoted; its ``lookup``
answers with what real servers answered (excel-mcp-server 2.2.2, mcp-server-sqlite, mcp-server-motherduck,
recorded in tests/data/tabular_tool_outputs.json) or with tables written as text. The loopback model
calls it, and every request the model server received is searched for the canaries.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing import Behavior, FakeLLMServer, ToolCall
from baton.testing.gateway_adapter import document, make_live, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import call, stdio_session, subagent_environ

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

RECORDINGS = json.loads((Path(__file__).parent / "data" / "tabular_tool_outputs.json").read_text())


def recorded() -> dict[str, dict[str, Any]]:
    """Every recorded tools/call result that holds a canary, by ``package:tool:index``."""
    found = {}
    for server in RECORDINGS["servers"]:
        for index, step in enumerate(server["calls"]):
            if "CANARY" in json.dumps(step["result"]):
                found[f"{server['package']}:{step['tool']}:{index}"] = step["result"]
    return found


def text_result(text: str) -> dict[str, Any]:
    """A tools/call result of one text block (what a filesystem server's read_file answers)."""
    return {"content": [{"type": "text", "text": text}], "isError": False}


TEXT_TABLES = {
    "csv": text_result(
        'id,customer,"Private Notes"\r\n1,ACME Corp,"CANARY-CSV-QUOTED, with ""quotes"""\r\n'
        "2,Globex,CANARY-CSV-PLAIN\r\n"
    ),
    "tsv": text_result("customer\tPRIVATE_NOTES\tplan\nACME Corp\tCANARY-TSV-CELL\tpro\n"),
    "markdown": text_result(
        "Customers found:\n\n| Customer | private notes | Plan |\n|:---|---|---:|\n"
        "| ACME Corp | CANARY-MD-CELL | pro |\n\nThat is all."
    ),
    "nested": text_result(
        json.dumps({"sheet": "Q3", "csv": "customer;api_key\nACME Corp;CANARY-NESTED-CELL\n"})
    ),
    "box": text_result(
        "┌───────────┬──────────────────┐\n│ customer  │ secret           │\n├───────────┼──────────────────┤\n"
        "│ ACME Corp │ CANARY-BOX-CELL  │\n└───────────┴──────────────────┘"
    ),
    "html": text_result(
        "<table><tr><th>Customer</th><th>Private Notes</th></tr>"
        "<tr><td>ACME Corp</td><td><b>CANARY-HTML-CELL</b></td></tr></table>"
    ),
    "labelled": text_result("Customer: ACME Corp\nPrivate notes: CANARY-LABELLED-LINE\nPlan: pro"),
    "embedded": text_result('1 row: [["customer", "private_notes"], ["ACME Corp", "CANARY-EMBEDDED-ROW"]]'),
    "fields": text_result(
        "| Field | Value |\n|---|---|\n| customer | ACME Corp |\n| Private notes | CANARY-FIELD |"
    ),
    "repeat": text_result(
        json.dumps({"comment": "the note said CANARY-PARENT-NOTE", "customer": "ACME Corp"})
    ),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A BATON_HOME with the ``sheets`` adapter live, its ``lookup`` answering the recorded results."""
    path = tmp_path_factory.mktemp("tables") / "home"
    answers = {**recorded(), **TEXT_TABLES}
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({"BATON_HOME": str(path), "BATON_NPM_REGISTRY": registry.url}))
        try:
            tools = [tool("lookup", customer="string")]
            env = {"BATON_TEST_MCP_RECORDED": json.dumps(answers)}
            make_live(runtime, document("sheets", publish(registry), tools, env=env), allowed=["lookup"])
        finally:
            runtime.close()
    return str(path)


@pytest.fixture(scope="module")
async def session(home: str, llm: FakeLLMServer) -> AsyncIterator[Any]:
    async with stdio_session(subagent_environ(home, llm.base_url)) as client:
        yield client


async def spawn_reading(
    session: Any, llm: FakeLLMServer, marker: str, keys: list[str], **spawn: Any
) -> tuple[dict[str, Any], str]:
    """Spawn a subagent whose model reads ``keys`` through the adapter, one call a round; its answer,
    and every request the model server received for it."""
    before = len(llm.requests)
    rounds = [[ToolCall("sheets__lookup", {"customer": key})] for key in keys]
    llm.when(marker, Behavior(tool_rounds=rounds, after_tools="Read: {tool_results}"))
    arguments = {"task": f"{marker}: summarize the customers", "tools": ["sheets__lookup"], **spawn}
    spawned = await call(session, "mcp_spawn_subagent", arguments)
    assert spawned["success"] is True, spawned
    sent = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in llm.requests[before:])
    assert marker in sent
    return spawned, sent


def with_header() -> list[str]:
    """The recorded results that show the private column's header (a bare range or a search's matched
    cells do not: only a spawn that saw the header knows them, see the last test)."""
    return [key for key, result in sorted(recorded().items()) if "private" in json.dumps(result).lower()]


@pytest.mark.parametrize("key", with_header())
async def test_a_canary_in_a_real_servers_table_never_reaches_a_model_request(
    session: Any, llm: FakeLLMServer, key: str
) -> None:
    spawned, sent = await spawn_reading(session, llm, "REAL-" + key.replace(":", "-").upper(), [key])
    assert "CANARY" not in sent
    assert "ACME Corp" in spawned["result"]  # the rest of the table did reach the model


@pytest.mark.parametrize("key", sorted(TEXT_TABLES))
async def test_a_canary_in_a_table_written_as_text_never_reaches_a_model_request(
    session: Any, llm: FakeLLMServer, key: str
) -> None:
    spawned, sent = await spawn_reading(
        session,
        llm,
        f"TEXT-{key.upper()}",
        [key],
        parent_context={"customer": "ACME Corp", "private_notes": "CANARY-PARENT-NOTE"},
    )
    assert "CANARY" not in sent
    assert "ACME Corp" in spawned["result"]


async def test_a_cell_seen_under_its_header_is_removed_where_it_comes_back_without_one(
    session: Any, llm: FakeLLMServer
) -> None:
    excel = [k for k in recorded() if k.startswith("excel-mcp-server:")]  # in the order they were made
    spawned, sent = await spawn_reading(session, llm, "REMEMBERED-CELLS", excel)
    assert "CANARY" not in sent
    assert spawned["result"].count("[filtered]") >= 6  # the table, the search's cells, the bare range


async def test_a_table_in_the_parent_context_reaches_the_subagent_without_its_private_column(
    session: Any, llm: FakeLLMServer
) -> None:
    before = len(llm.requests)
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {
            "task": "PARENT-TABLE: summarize the sheet",
            "context_strategy": "full",
            "parent_context": {
                "sheet": 'customer,"Private Notes"\nACME Corp,CANARY-PARENT-CSV\n',
                "rows": [["customer", "private_notes"], ["Globex", "CANARY-PARENT-ROW"]],
            },
        },
    )
    assert spawned["success"] is True, spawned
    sent = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in llm.requests[before:])
    assert "PARENT-TABLE" in sent and "ACME Corp" in sent and "Globex" in sent
    assert "CANARY" not in sent and "CANARY" not in spawned["prepared_context"]
    assert "rows[*].private_notes" in spawned["filtered_fields"]


async def test_a_value_removed_from_the_parent_context_is_removed_from_a_follow_up_message(
    session: Any, llm: FakeLLMServer
) -> None:
    spawned = await call(
        session,
        "mcp_spawn_subagent",
        {"task": "FOLLOW-UP: wait", "parent_context": {"private_notes": "CANARY-FOLLOW-UP-NOTE"}},
    )
    before = len(llm.requests)
    answered = await call(
        session,
        "mcp_send_message_to_subagent",
        {"subagent_id": spawned["subagent_id"], "message": "FOLLOW-UP-2: the note was CANARY-FOLLOW-UP-NOTE"},
    )
    assert answered["success"] is True, answered
    sent = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in llm.requests[before:])
    assert "FOLLOW-UP-2" in sent and "CANARY" not in sent
