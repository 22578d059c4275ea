"""The CLI's layout read from its imports: subsystem CLIs sit above baton.terminal, not below baton.cli."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def imports_of(path: Path) -> set[str]:
    """Every baton module a file imports, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("baton"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("baton"))
    return found


def module_graph() -> dict[str, set[str]]:
    modules = {
        ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (SRC / "baton").rglob("*.py")
    }
    return {name: imports_of(path) & modules.keys() for name, path in modules.items()}


def test_only_the_entry_points_import_the_top_level_cli() -> None:
    importers = {name for name, deps in module_graph().items() if "baton.cli" in deps}
    assert importers <= {"baton.launcher", "baton.__main__"}


def test_campaign_and_notify_have_no_import_circles() -> None:
    graph = module_graph()
    for package in ("baton.campaign", "baton.notify"):
        members = {name for name in graph if name.startswith(package + ".")}
        for name in members:
            seen: set[str] = set()
            stack = list(graph[name] & members)
            while stack:
                current = stack.pop()
                assert current != name, f"{name} imports itself through {sorted(seen)}"
                if current not in seen:
                    seen.add(current)
                    stack.extend(graph[current] & members)
