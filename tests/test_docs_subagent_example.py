"""The worked example of docs/subagents.md runs as written: its commands, its spawn, its approval.

The section's ``bash`` blocks are run line by line as CLI processes (lock, verify, replay, allow,
promote; then ``baton hitl approve``), its ``mcp_spawn_subagent`` JSON goes to ``python -m baton serve``
over stdio, and the loopback model makes exactly the two calls its steps 1 and 2 show. The file on the
host must hold the total afterwards. Offline, excel-mcp-server 2.2.2 is the stand-in of
tests/excel_double.py served from a local index; with ``BATON_LIVE_REGISTRY=1`` it is the real package
from PyPI. The substitutions are the ones the section itself names.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.testing import Behavior, FakeLLMServer, ToolCall
from baton.testing.npm_registry import NpmRegistryServer, build_wheel
from tests import excel_double
from tests.cli_process import run_cli
from tests.conftest import call, stdio_session, subagent_environ

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "subagents.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("### Worked example") : DOC.index("## Context strategies")]
RECORDED = json.loads((Path(__file__).parent / "data" / "excel_mcp_server_2.2.2.json").read_text())
LIVE = os.environ.get("BATON_LIVE_REGISTRY") == "1"
WHEEL = "excel_mcp_server-2.2.2-py3-none-any.whl"
AMOUNTS = [1000] * 37 + [4250]  # C2:C39, 41,250 in all


def bash_blocks() -> list[list[str]]:
    """Each ``bash`` block of the section: its commands, ``&&`` chains split."""
    blocks = re.findall(r"^ *```bash\n(.*?)^ *```", SECTION, re.M | re.S)
    return [
        [part.strip() for line in block.splitlines() if line.strip() for part in line.split("&&")]
        for block in blocks
    ]


def spawn_arguments() -> dict[str, Any]:
    """The ``mcp_spawn_subagent`` arguments the section shows."""
    found = re.search(r"```json\nmcp_spawn_subagent (\{.*?\})\n```", SECTION, re.S)
    assert found is not None
    return dict(json.loads(found.group(1)))


def model_calls() -> list[ToolCall]:
    """The tool calls the section's steps say the subagent's model makes, in order."""
    calls = re.findall(r"calls `(excel__\w+)` with `(\{.*?\})`", SECTION)
    return [ToolCall(name, json.loads(arguments)) for name, arguments in calls]


def run_line(line: str, env: dict[str, str], books: Path) -> None:
    """One command of the section, with its documented substitutions."""
    argv = [arg.replace("/srv/books", str(books)) for arg in shlex.split(line)]
    if argv[:3] == ["sudo", "chown", "-R"]:
        for path in [books, *books.rglob("*")]:
            if os.geteuid() == 0:
                os.chown(path, 65534, 65534)
            else:
                path.chmod(0o777 if path.is_dir() else 0o666)
        return
    assert argv[0] == "baton", f"the example runs only baton commands and its chown: {line}"
    done = run_cli(env, *argv[1:])
    assert done.returncode == 0, (line, done.stdout, done.stderr)


def xlsx(path: Path, sheet: str, cells: dict[str, int]) -> None:
    """A minimal workbook of one sheet of numbers, as Excel's Open XML (for the real server)."""
    rows = "".join(
        f'<row r="{ref[1:]}"><c r="{ref}"><v>{value}</v></c></row>' for ref, value in cells.items()
    )
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    package = "http://schemas.openxmlformats.org/package/2006"
    with zipfile.ZipFile(path, "w") as book:
        book.writestr(
            "[Content_Types].xml",
            f'<Types xmlns="{package}/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
        )
        book.writestr(
            "_rels/.rels",
            f'<Relationships xmlns="{package}/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        )
        book.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets><sheet name="{sheet}" sheetId="1" '
            'r:id="rId1"/></sheets></workbook>',
        )
        book.writestr(
            "xl/_rels/workbook.xml.rels",
            f'<Relationships xmlns="{package}/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        )
        book.writestr(
            "xl/worksheets/sheet1.xml", f'<worksheet xmlns="{main}"><sheetData>{rows}</sheetData></worksheet>'
        )


def total_in_c40(path: Path) -> Any:
    """What the host's workbook holds in March!C40."""
    if not LIVE:
        return json.loads(path.read_text(encoding="utf-8"))["March"].get("C40")
    with zipfile.ZipFile(path) as book:
        sheets = [n for n in book.namelist() if n.startswith("xl/worksheets/sheet")]
        text = "".join(book.read(n).decode("utf-8") for n in sheets)
    found = re.search(r'<c r="C40"[^>]*>(?:<f>[^<]*</f>)?<v>([^<]*)</v>', text)
    return int(float(found.group(1))) if found else None


@pytest.fixture
def registry() -> Iterator[str | None]:
    """The index excel-mcp-server 2.2.2 comes from: a local one with the stand-in (None: PyPI)."""
    if LIVE:
        yield None
        return
    with NpmRegistryServer() as server:
        wheel = build_wheel(excel_double.wheel_files(RECORDED))
        server.publish_wheel("excel-mcp-server", "2.2.2", WHEEL, wheel)
        yield server.url


@pytest.fixture
def books() -> Iterator[Path]:
    """The host directory standing for /srv/books (pytest's tmp_path is 0700: the sandbox cannot enter)."""
    base = Path(tempfile.mkdtemp(prefix="baton-books-"))
    base.chmod(0o755)
    (base / "books").mkdir()
    yield base / "books"
    shutil.rmtree(base, ignore_errors=True)


async def test_the_worked_example_runs_as_written(
    tmp_path: Path, fake_llm: FakeLLMServer, registry: str | None, books: Path
) -> None:
    cells = {f"C{row}": amount for row, amount in zip(range(2, 40), AMOUNTS, strict=True)}
    if LIVE:
        xlsx(books / "q1.xlsx", "March", cells)
    else:
        (books / "q1.xlsx").write_text(json.dumps({"March": cells}), encoding="utf-8")
    env = subagent_environ(
        str(tmp_path / "home"),
        fake_llm.base_url,
        BATON_SUBAGENT_APPROVAL_WAIT_SECONDS="0",
        HITL_TIMEOUT_SECONDS="600",
        **({"BATON_PYPI_URL": registry} if registry else {}),
    )
    setup, approve = bash_blocks()
    for line in setup:
        run_line(line, env, books)

    spawn = spawn_arguments()
    calls = model_calls()
    assert [c.name for c in calls] == ["excel__read_range", "excel__write_range"]
    fake_llm.when(
        spawn["task"][:40], Behavior(tool_rounds=[[c] for c in calls], after_tools="Done: {tool_results}")
    )
    async with stdio_session(env) as session:
        spawned = await call(session, "mcp_spawn_subagent", spawn)
        assert spawned["status"] == "waiting_for_approval", spawned
        assert total_in_c40(books / "q1.xlsx") is None  # nothing is written before the person's yes
        (line,) = approve
        await anyio.to_thread.run_sync(
            run_line, line.replace("REQUEST_ID", spawned["request_id"]), env, books
        )
        with anyio.fail_after(300):
            while (
                status := await call(
                    session, "mcp_get_subagent_status", {"subagent_id": spawned["subagent_id"]}
                )
            )["status"] != "completed":
                assert status["status"] in ("running", "queued"), status
                await anyio.sleep(0.05)
    assert "41250" in fake_llm.all_request_text()  # the model was shown what it read and wrote
    assert total_in_c40(books / "q1.xlsx") == 41250
