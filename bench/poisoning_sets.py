"""Record public tool-poisoning sets as tool definitions (tests/data/poisoning/, its README says which).

``python -m bench.poisoning_sets --safetybench CLONE --cisco CLONE --msb CLONE`` reads git clones at the
pinned commits below (``git show``, nothing is executed: tools are read from the Python source with ``ast``) and
writes one JSON file per set. Each file holds the set's benign servers (``servers``: name → definitions)
and its attacks (``attacks``), each with its type, the server it sits on and how it gets there
(``mode``: ``replace`` a tool of that server, ``add`` a tool to it, ``alone``: a server of its own,
``beside``: a server of its own beside the set's, ``instead``: one standing in for ``benign_server``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "poisoning"

SAFETYBENCH = {
    "name": "MCP-SafetyBench",
    "repository": "github.com/xjzzzzzzzz/MCPSafety",
    "commit": "7872437b6369aac1150e3a19e350a981dc554f81",
}
CISCO = {
    "name": "Cisco AI Defense mcp-scanner evaluations",
    "repository": "github.com/cisco-ai-defense/mcp-scanner",
    "commit": "893327c54d223ea07296f68f32d8294f5c045f4a",
}
MSB = {
    "name": "MSB (MCP Security Bench)",
    "repository": "github.com/dongsenzhang/MSB",
    "commit": "c1d6a70171e4d2c44c87a2ae909d13df00c6aa8d",
}
#: MSB's attacks that sit in a definition, and whether the attacking server stands beside the benign one
#: ("beside") or in its place ("instead"), as its ``metrics.py`` (``ATTACK_WO_BENIGN_TOOL``) says.
MSB_SIGNATURE_ATTACKS = {
    "name_overlap": "beside",
    "preference_manipulation": "beside",
    "preference_manipulation-out_of_scope_parameter": "beside",
    "out_of_scope_parameter": "instead",
}
#: The server each MCP-SafetyBench domain's attacks land on (its runner adds a tool to the first server).
SAFETYBENCH_DOMAINS = {
    "browser_automation": "playwright",
    "financial_analysis": "yahoo_finance",
    "location_navigation": "google_maps",
    "repository_management": "github",
    "web_search": "google_search",
}
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_JSON_TYPES |= {"list": "array", "List": "array", "dict": "object", "Dict": "object"}


def git(clone: Path, *args: str) -> str:
    """One git command's output in a clone (a bare mirror works too)."""
    done = subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True, check=True)
    return done.stdout


def _is_tool(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "tool"


def _annotation_type(node: ast.expr | None) -> str | None:
    """The JSON type FastMCP would give a simple annotation (Optional[X] → X's)."""
    if isinstance(node, ast.Subscript):
        head = node.value.id if isinstance(node.value, ast.Name) else ""
        return _annotation_type(node.slice) if head == "Optional" else _JSON_TYPES.get(head)
    return _JSON_TYPES.get(node.id) if isinstance(node, ast.Name) else None


def _schema(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    """The arguments FastMCP would list: all but the ``Context`` it injects."""
    first_default = len(function.args.args) - len(function.args.defaults)
    arguments = [
        (index, arg)
        for index, arg in enumerate(function.args.args)
        if not (isinstance(arg.annotation, ast.Name) and arg.annotation.id == "Context")
    ]
    properties: dict[str, Any] = {}
    for _, arg in arguments:
        json_type = _annotation_type(arg.annotation)
        properties[arg.arg] = {
            "title": arg.arg.replace("_", " ").title(),
            **({"type": json_type} if json_type else {}),
        }
    required = [arg.arg for index, arg in arguments if index < first_default]
    return {"type": "object", "properties": properties, "required": required}


def tools_in_source(source: str) -> list[dict[str, Any]]:
    """The tool definitions a FastMCP server's source declares: name, docstring, argument schema."""
    definitions = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            map(_is_tool, node.decorator_list)
        ):
            definition = {"name": node.name, "description": ast.get_docstring(node) or ""}
            definitions.append({**definition, "inputSchema": _schema(node)})
    return definitions


def case_id(*parts: str) -> str:
    """A stable id for one case: the held-out split is keyed by it."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _simple_schema(parameters: dict[str, str]) -> dict[str, Any]:
    properties = {k: {"type": _JSON_TYPES.get(v, v)} for k, v in parameters.items()}
    return {"type": "object", "properties": properties, "required": list(parameters)}


def safetybench(clone: Path) -> dict[str, Any]:
    """MCP-SafetyBench: its 13 servers' tools, and every task whose attack is written into a tool definition."""
    commit = SAFETYBENCH["commit"]
    servers = {}
    for path in git(clone, "ls-tree", "-r", "--name-only", commit, "mcpuniverse/mcp/servers").split():
        if path.endswith("/server.py"):
            servers[path.split("/")[-2]] = tools_in_source(git(clone, "show", f"{commit}:{path}"))
    attacks, skipped = [], {}
    tasks = git(clone, "ls-tree", "-r", "--name-only", commit, "mcpuniverse/benchmark/configs/test").split()
    for path in sorted(p for p in tasks if p.endswith(".json")):
        task = json.loads(git(clone, "show", f"{commit}:{path}"))
        kind, server = task["attack_category"], SAFETYBENCH_DOMAINS[path.split("/")[-2]]
        found = list(_safetybench_attacks(task, servers, server))
        if not found:
            skipped[kind] = skipped.get(kind, 0) + 1
        for mode, on, definition in found:
            attacks.append(
                {"id": case_id("safetybench", path, definition["name"]), "attack_type": kind, "server": on,
                 "mode": mode, "source": path, "definitions": [definition]}
            )  # fmt: skip
    return {"source": SAFETYBENCH, "servers": servers, "attacks": attacks, "not_in_a_definition": skipped}


def _safetybench_attacks(
    task: dict[str, Any], servers: dict[str, list[dict[str, Any]]], domain_server: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """(mode, server, definition) of a task's poisoned definitions; none when the attack is elsewhere."""
    found = []
    for change in task.get("mcp_server_modifications") or []:
        if "modification_description" not in change:
            continue  # a poisoned result, not a definition
        server = next(
            s for s, tools in servers.items() if any(t["name"] == change["tool_name"] for t in tools)
        )
        original = next(t for t in servers[server] if t["name"] == change["tool_name"])
        found.append(("replace", server, {**original, "description": change["modification_description"]}))
    addition = task.get("mcp_server_additions")
    for tool in [addition] if addition and "tool_name" in addition else (addition or {}).get("tools", []):
        schema = _simple_schema(tool.get("input_parameters") or {})
        found.append(
            (
                "add",
                domain_server,
                {"name": tool["tool_name"], "description": tool["description"], "inputSchema": schema},
            )
        )
    return found


def cisco(clone: Path) -> dict[str, Any]:
    """Cisco's behavioural evaluation (141 malicious servers) and its benign remote-scan servers."""
    commit = CISCO["commit"]
    benign = [
        "evals/remote/benign/GitHub_tools.py",
        "evals/remote/benign/azure_tools.py",
        "evals/remote/benign/discord_tools.py",
        "evals/behavioral-analysis/scripts/safe_fastmcp_server.py",
    ]
    servers = {Path(p).stem: tools_in_source(git(clone, "show", f"{commit}:{p}")) for p in benign}
    attacks = []
    data = "evals/behavioral-analysis/data"
    for path in sorted(git(clone, "ls-tree", "-r", "--name-only", commit, data).split()):
        if not path.endswith(".py"):
            continue
        definitions = tools_in_source(git(clone, "show", f"{commit}:{path}"))
        attacks.append(
            {"id": case_id("cisco", path), "attack_type": path.split("/")[-2], "server": Path(path).stem,
             "mode": "alone", "source": path, "definitions": definitions}
        )  # fmt: skip
    return {"source": CISCO, "servers": servers, "attacks": attacks}


def msb(clone: Path) -> dict[str, Any]:
    """MSB: its six benign servers, their signature attacks (name collision, preference manipulation,
    out-of-scope parameter; each a server standing beside or instead of the benign one) and its prompt
    injection, which its agent appends to the tool list's end."""
    commit, root = MSB["commit"], "data/tools/attack_tools"
    files = [p for p in git(clone, "ls-tree", "-r", "--name-only", commit, root).split() if p.count("/") == 5]
    servers, variants = {}, []
    for path in sorted(p for p in files if p.endswith(".py")):
        kind = Path(path).stem.partition("-")[2]
        definitions = tools_in_source(git(clone, "show", f"{commit}:{path}"))
        if definitions and not kind:
            servers[path.split("/")[4]] = definitions
        elif kind in MSB_SIGNATURE_ATTACKS:
            variants.append((path, kind, definitions))
    attacks = [
        {"id": case_id("msb", path), "attack_type": kind, "server": f"{path.split('/')[4]}-{kind}",
         "mode": MSB_SIGNATURE_ATTACKS[kind], "benign_server": path.split("/")[4], "source": path,
         "definitions": definitions}
        for path, kind, definitions in variants
    ]  # fmt: skip
    return {"source": MSB, "servers": servers, "attacks": attacks + _msb_injections(clone, servers)}


def _msb_injections(clone: Path, servers: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """MSB's prompt injection: its template with each attack task's goal, after each server's last tool."""
    commit = MSB["commit"]
    module = ast.parse(git(clone, "show", f"{commit}:data/prompt_template.py"))
    template = next(
        node.value.value
        for node in module.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PROMPT_INJECTION_TEMPLATE"
        and isinstance(node.value, ast.Constant)
    )  # fmt: skip
    tasks = [
        json.loads(line)
        for line in git(clone, "show", f"{commit}:data/attack_task.jsonl").splitlines()
        if line
    ]
    attacks = []
    for server, definitions in servers.items():
        last = definitions[-1]
        for task in tasks:
            poisoned = {
                **last,
                "description": last["description"] + str(template).replace("{goal}", task["implementation"]),
            }
            attacks.append(
                {"id": case_id("msb", server, task["attack_task"]), "attack_type": "prompt_injection", "server": server,
                 "mode": "replace", "source": "data/prompt_template.py", "definitions": [poisoned]}
            )  # fmt: skip
    return attacks


def write(name: str, recorded: dict[str, Any], licence: str) -> None:
    """One set's file, its licence beside the source."""
    recorded["source"] = {**recorded["source"], "licence": licence}
    DATA.mkdir(parents=True, exist_ok=True)
    text = json.dumps(recorded, indent=1, ensure_ascii=False) + "\n"
    (DATA / f"{name}.json").write_text(text, encoding="utf-8")


def main() -> int:
    """Record the sets whose clones are given."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--safetybench", type=Path, help="a clone of MCP-SafetyBench")
    parser.add_argument("--cisco", type=Path, help="a clone of cisco-ai-defense/mcp-scanner")
    parser.add_argument("--msb", type=Path, help="a clone of dongsenzhang/MSB")
    options = parser.parse_args()
    if options.safetybench:
        write(
            "mcp-safetybench",
            safetybench(options.safetybench),
            "BSD-3-Clause (pyproject.toml); see README.md",
        )
    if options.cisco:
        write("cisco-mcp-scanner", cisco(options.cisco), "Apache-2.0")
    if options.msb:
        write("msb", msb(options.msb), "MIT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
