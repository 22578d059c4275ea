"""A stand-in for excel-mcp-server 2.2.2 (standard library only), packaged as a wheel of the same name.

It answers initialize and tools/list with what the real server answered (recorded in
tests/data/excel_mcp_server_2.2.2.json, baked into the wheel) and runs ``describe_workbook``,
``read_range`` and ``write_range`` with the real server's answer shapes over a workbook kept as JSON
(``{"Sheet": {"C2": 1000, ...}}``): the docs' worked example runs offline against it, unchanged but for
the index it is fetched from (see tests/test_docs_subagent_example.py).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).with_name("excel_mcp_server.json")
CELL = re.compile(r"^([A-Z]+)(\d+)$")


def column_number(letters: str) -> int:
    """A column's number (A=1)."""
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - 64
    return number


def column_letters(number: int) -> str:
    """A column's letters (1=A)."""
    letters = ""
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def cells_of(range_: str) -> list[list[str]]:
    """The addresses of an ``A1:C3`` range, row by row."""
    first, _, last = range_.partition(":")
    start, end = CELL.match(first), CELL.match(last or first)
    if start is None or end is None:
        raise ValueError(f"not a range: {range_}")
    columns = range(column_number(start.group(1)), column_number(end.group(1)) + 1)
    rows = range(int(start.group(2)), int(end.group(2)) + 1)
    return [[f"{column_letters(c)}{r}" for c in columns] for r in rows]


def run(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool's structured answer, shaped as the real server's."""
    path = Path(str(arguments["path"]))
    book: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if name == "describe_workbook":
        return {"path": str(path), "sheets": [{"name": sheet} for sheet in book]}
    sheet = book.setdefault(str(arguments["sheet"]), {})
    if name == "read_range":
        grid = cells_of(str(arguments["range"]))
        return {"range": arguments["range"], "values": [[sheet.get(cell) for cell in row] for row in grid]}
    if name == "write_range":
        rows = arguments["rows"]
        top = CELL.match(str(arguments["at"]))
        assert top is not None
        column, row = column_number(top.group(1)), int(top.group(2))
        for i, values in enumerate(rows):
            for j, value in enumerate(values):
                sheet[f"{column_letters(column + j)}{row + i}"] = value
        path.write_text(json.dumps(book, sort_keys=True), encoding="utf-8")
        end = f"{column_letters(column + max(len(r) for r in rows) - 1)}{row + len(rows) - 1}"
        return {"sheet": arguments["sheet"], "range": f"{arguments['at']}:{end}", "cells_written": 1}
    raise ValueError(f"{name} is not played by this double")


def answer(request: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC answer to one request (None for a notification)."""
    method, request_id = request.get("method"), request.get("id")
    if request_id is None:
        return None
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": request_id, "result": recorded["initialize"]}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": recorded["tools"]}}
    if method == "tools/call":
        params = request.get("params") or {}
        try:
            value = run(str(params.get("name")), params.get("arguments") or {})
        except (OSError, ValueError, KeyError) as exc:
            text = {"content": [{"type": "text", "text": str(exc)}], "isError": True}
            return {"jsonrpc": "2.0", "id": request_id, "result": text}
        content = [{"type": "text", "text": json.dumps(value, separators=(",", ":"))}]
        result = {"content": content, "isError": False, "structuredContent": value}
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    return {"jsonrpc": "2.0", "id": request_id, "result": {}}


def main() -> None:
    """Serve over stdio until stdin closes."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), recorded)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def wheel_files(recorded: dict[str, Any]) -> dict[str, bytes | str]:
    """The files of the double's wheel: ``excel-mcp-server`` 2.2.2, its console script running :func:`main`."""
    info = "excel_mcp_server-2.2.2.dist-info"
    return {
        "excel_mcp/__init__.py": "",
        "excel_mcp/server.py": Path(__file__).read_text(encoding="utf-8"),
        "excel_mcp/excel_mcp_server.json": json.dumps(recorded),
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: excel-mcp-server\nVersion: 2.2.2\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: baton.tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\nexcel-mcp-server = excel_mcp.server:main\n",
        f"{info}/RECORD": "",
    }


if __name__ == "__main__":
    main()
