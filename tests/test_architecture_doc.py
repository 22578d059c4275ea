"""docs/architecture.md is the map of the tree: every package and root module is on it, and it names none
that is gone, so the map cannot drift from the layout."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "baton"
MAP = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def named_in_map() -> set[str]:
    """Every name the map's tables give in backticks, a package with its trailing slash."""
    cells = [line for line in MAP.splitlines() if line.startswith("| ")]
    return {name for line in cells for name in re.findall(r"`([\w./]+)`", line)}


def test_every_package_and_root_module_of_baton_is_on_the_map() -> None:
    named = named_in_map()
    for entry in SOURCE.iterdir():
        if entry.is_dir() and (entry / "__init__.py").exists():
            assert f"{entry.name}/" in named, f"baton/{entry.name}/ is not on docs/architecture.md"
        elif entry.suffix == ".py" and entry.stem != "__init__":
            assert entry.stem in named, f"baton/{entry.name} is not on docs/architecture.md"


def test_every_part_of_the_gateway_is_on_the_map() -> None:
    named = named_in_map()
    for entry in (SOURCE / "gateway").iterdir():
        if entry.is_dir() and (entry / "__init__.py").exists():
            assert f"{entry.name}/" in named, f"gateway/{entry.name}/ is not on docs/architecture.md"
        elif entry.suffix == ".py" and entry.stem != "__init__":
            assert entry.stem in named, f"gateway/{entry.name} is not on docs/architecture.md"


def test_the_map_names_no_package_that_is_gone() -> None:
    packages = {init.parent.name for init in SOURCE.rglob("__init__.py")}
    for name in named_in_map():
        if name.endswith("/"):
            assert name.rstrip("/") in packages, f"docs/architecture.md names {name}, which is gone"


def test_every_path_the_map_gives_exists() -> None:
    for path in set(re.findall(r"`([\w/]+/[\w]+\.py)`", MAP)):
        assert (SOURCE / path).is_file(), f"docs/architecture.md names {path}, which is not in src/baton"
