"""pydantic-ai is imported safely: every function-level ``from pydantic_ai… import`` in ``src/baton`` comes after
``load_pydantic_ai()`` / ``await aload_pydantic_ai()`` in the same (or an enclosing) function, or runs under
``IMPORT_LOCK`` (or ``importing()``, the lock with the collector paused).

pydantic-ai's modules import each other circularly. The warm-up imports a provider in a worker thread a
moment after start; a subagent turn that imported ``pydantic_ai.messages`` on the event loop meanwhile got
``ImportError: … partially initialized module`` and every later turn of that server failed with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SRC

LOADERS = {"load_pydantic_ai", "aload_pydantic_ai"}


def _holds_the_lock(expression: ast.expr) -> bool:
    """``IMPORT_LOCK`` itself, or ``importing()`` (the lock with the collector paused)."""
    if isinstance(expression, ast.Call):
        return isinstance(expression.func, ast.Name) and expression.func.id == "importing"
    return isinstance(expression, ast.Name) and expression.id == "IMPORT_LOCK"


def _guarded(function: ast.AST, line: int) -> bool:
    """Whether ``function`` calls a loader, or enters ``IMPORT_LOCK`` (or ``importing()``), before ``line``."""
    for node in ast.walk(function):
        if getattr(node, "lineno", line) >= line:
            continue
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
            if name in LOADERS:
                return True
        if isinstance(node, ast.With) and any(_holds_the_lock(item.context_expr) for item in node.items):
            return True
    return False


def _unguarded_imports(path: Path, root: Path = SRC) -> list[str]:
    """``path``'s function-level pydantic-ai imports with no loader before them, as ``path:line`` under ``root``."""
    tree = ast.parse(path.read_text())
    found: list[str] = []

    def visit(node: ast.AST, functions: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, [*functions, child])
                continue
            is_pydantic_ai = (
                isinstance(child, ast.ImportFrom) and (child.module or "").split(".")[0] == "pydantic_ai"
            ) or (
                isinstance(child, ast.Import)
                and any(alias.name.split(".")[0] == "pydantic_ai" for alias in child.names)
            )
            if is_pydantic_ai and functions:
                line = child.lineno
                if not any(_guarded(function, line) for function in functions):
                    found.append(f"{path.relative_to(root)}:{line}")
            visit(child, functions)

    visit(tree, [])
    return found


def test_every_function_level_pydantic_ai_import_is_guarded() -> None:
    unguarded = [hit for path in sorted(SRC.rglob("*.py")) for hit in _unguarded_imports(path)]
    assert unguarded == [], "pydantic-ai imported without load_pydantic_ai() first: " + ", ".join(unguarded)


def test_the_guard_check_sees_an_unguarded_import(tmp_path: Path) -> None:
    """The check above can fail: an import with no loader before it is reported.

    The probe is written under ``tmp_path``, never into ``src/``: tests that walk the package (the import
    graph) run beside this one and would read a file that is about to vanish."""
    module = tmp_path / "baton" / "_unguarded_probe.py"
    module.parent.mkdir()
    module.write_text(
        "def f():\n    from pydantic_ai.messages import ModelRequest\n    return ModelRequest\n"
    )
    assert _unguarded_imports(module, tmp_path) == ["baton/_unguarded_probe.py:2"]
