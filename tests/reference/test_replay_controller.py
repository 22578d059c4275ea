"""The reference replay controller, vendored with its indentation restored: not one token changed.

``/work/shared/reference/replay_controller.txt`` lost its indentation in transit; the copy here is that
text re-indented, and these checks keep it so: the same characters once whitespace is removed, the same
lines once leading whitespace is removed, and a module Python compiles.
"""

from __future__ import annotations

import hashlib
import py_compile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RESTORED = HERE / "replay_controller.py"
#: The original as it reached the project (outside the repository; the check is skipped without it).
ORIGINAL = Path("/work/shared/reference/replay_controller.txt")
#: sha256 of the original with all whitespace removed, so the check holds where the original is absent.
ORIGINAL_STRIPPED_SHA256 = "1560f9985db13886869dbb8f193453f7ff3aa0a6cb569a55fe4d0f12aa469b5f"


def stripped(text: str) -> str:
    """The text with every whitespace character removed."""
    return "".join(text.split())


@pytest.mark.skipif(not ORIGINAL.is_file(), reason="the original reference text is not on this machine")
def test_the_restored_controller_equals_the_original_once_whitespace_is_removed() -> None:
    original = ORIGINAL.read_text(encoding="utf-8")
    restored = RESTORED.read_text(encoding="utf-8")
    assert stripped(restored) == stripped(original)
    lines = [line.lstrip() for line in restored.splitlines() if line.strip()]
    assert lines == [line.lstrip() for line in original.splitlines() if line.strip()]


def test_the_restored_controller_has_the_original_s_tokens_wherever_the_original_is_not() -> None:
    restored = RESTORED.read_text(encoding="utf-8")
    assert hashlib.sha256(stripped(restored).encode("utf-8")).hexdigest() == ORIGINAL_STRIPPED_SHA256


def test_the_restored_controller_compiles(tmp_path: Path) -> None:
    py_compile.compile(str(RESTORED), cfile=str(tmp_path / "controller.pyc"), doraise=True)
