"""Every tool, listed by a real ``python -m baton serve`` over a raw stdio pipe, called with hostile values:
wrong types, 1 MB strings, deep nesting, unicode (a lone surrogate too), nulls and extra fields. Each call
answers success or a typed error_class (never internal_error), stderr holds no traceback, and the server
still answers mcp_ping at the end."""

from __future__ import annotations

import json
import threading
from typing import Any

from baton.errors import ERROR_CLASSES
from tests.raw_stdio import raw_stdio


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


HOSTILE: list[Any] = [
    None,
    0,
    -(2**70),
    True,
    1.5e308,
    [],
    {},
    [None, {"a": []}],
    "",
    "é😀\u202e\u0000\U0010ffff",
    "\ud800",  # a lone surrogate: JSON may escape it, the SDK's parser refuses it (-32602)
    _nested(100),
]
MEGABYTE = "m" * (1024 * 1024)


def _base_value(schema: dict[str, Any]) -> Any:
    kinds = schema.get("type") or next(
        (option.get("type") for option in schema.get("anyOf", []) if option.get("type") != "null"), "string"
    )
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "x", "integer": 1, "number": 1, "boolean": False, "object": {}, "array": []}.get(
        kinds if isinstance(kinds, str) else "string", "x"
    )


def _cases(tool: dict[str, Any]) -> list[dict[str, Any]]:
    schema = tool["inputSchema"]
    properties: dict[str, Any] = schema.get("properties", {})
    base = {name: _base_value(properties[name]) for name in schema.get("required", [])}
    cases: list[dict[str, Any]] = [{}, {**base, "unexpected_extra_field": 1}]
    for index, name in enumerate(properties):
        cases += [{**base, name: value} for value in HOSTILE]
        if index == 0:
            cases.append({**base, name: MEGABYTE})
    return cases


def test_every_tool_answers_hostile_arguments_with_a_typed_result(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "HITL_TIMEOUT_SECONDS": "1", "BATON_HITL_PROGRESS_SECONDS": "10"}
    with raw_stdio(env) as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = server.reply(2)["result"]["tools"]
        assert len(tools) >= 20
        calls: dict[int, tuple[str, dict[str, Any]]] = {}
        for tool in tools:
            for arguments in _cases(tool):
                calls[len(calls) + 100] = (tool["name"], arguments)

        def write_all() -> None:
            for request_id, (name, arguments) in calls.items():
                server.send(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "method": "tools/call",
                        "params": {"name": name, "arguments": arguments},
                    }
                )

        writer = threading.Thread(target=write_all)
        writer.start()
        answered = {
            message["id"]: message for message in server.read_until(*calls) if message.get("id") in calls
        }
        writer.join()

        protocol_refusals = 0
        for request_id, message in answered.items():
            name, arguments = calls[request_id]
            if "error" in message:  # refused by the JSON-RPC layer (only the lone surrogate)
                assert message["error"]["code"] == -32602, (name, message)
                assert "\ud800" in json.dumps(arguments, ensure_ascii=False).encode(
                    "utf-8", "surrogatepass"
                ).decode("utf-8", "surrogatepass")
                protocol_refusals += 1
                continue
            result = message["result"]["structuredContent"]
            if result["success"] is not True:
                assert result["error_class"] in ERROR_CLASSES, (name, result)
                assert result["error_class"] != "internal_error", (name, arguments, result)
        assert protocol_refusals == sum(1 for _n, a in calls.values() if "\ud800" in a.values())

        server.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "mcp_ping", "arguments": {}},
            }
        )
        assert server.reply(3)["result"]["structuredContent"]["success"] is True
        server.close()
        log = server.stderr()
    assert "Traceback" not in log, log[-3000:]
