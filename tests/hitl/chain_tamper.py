"""An exported chain edited by someone who rewrites every later hash (and drops the checkpoints), and the
standalone verifier run on it from a directory holding nothing but a copy of ``chain_verify.py``.

A rehashed chain agrees with itself, so whatever catches the edit is the check under test (the approvals'
assertions, the policy replay), never the hash chain.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baton.evidence.receipts import GENESIS_SHA256, receipt_digest

#: Run the copied verifier with baton unimportable (and, for the stdlib-only mode, cryptography too).
RUN_COPY = "import runpy, sys\n{blocked}runpy.run_module('chain_verify', run_name='__main__')\n"

Rows = list[dict[str, Any]]


def read_rows(export: Path) -> Rows:
    """The export's receipts, payloads parsed."""
    lines = (export / "receipts.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def write_rechained(export: Path, rows: Rows) -> None:
    """Write ``rows`` renumbered, relinked and rehashed, with no checkpoint left to contradict them."""
    prev = GENESIS_SHA256
    lines = []
    for seq, row in enumerate(rows, start=1):
        sha = receipt_digest(seq, row["kind"], row["at"], row["payload"], prev)
        lines.append(json.dumps({**row, "seq": seq, "prev_sha256": prev, "sha256": sha}))
        prev = sha
    (export / "receipts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (export / "checkpoints.jsonl").unlink(missing_ok=True)


def tampered(export: Path, where: Path, edit: Callable[[Rows], None]) -> Path:
    """A copy of ``export`` at ``where`` with ``edit`` applied to its rows, then rehashed."""
    shutil.copytree(export, where)
    rows = read_rows(where)
    edit(rows)
    write_rechained(where, rows)
    return where


def one(rows: Rows, kind: str, **match: Any) -> dict[str, Any]:
    """The one receipt payload of ``kind`` whose fields equal ``match`` (itself: an edit changes the row)."""
    (found,) = [
        r["payload"]
        for r in rows
        if r["kind"] == kind and all(r["payload"].get(k) == v for k, v in match.items())
    ]
    payload: dict[str, Any] = found
    return payload


def standalone_verifier(tmp_path: Path) -> Path:
    """A directory holding only copies of the verifier's standard-library files: ``chain_verify.py`` and
    the ``delegation.py`` it imports (``witness_verify.py`` too, for ``--witness-key``)."""
    import baton.chain_verify

    verifier = tmp_path / "verifier-only"
    verifier.mkdir()
    source = Path(baton.chain_verify.__file__).parent
    for name in ("chain_verify.py", "delegation.py", "witness_verify.py"):
        shutil.copy(source / name, verifier / name)
    return verifier


def verify_copy(
    verifier: Path, export: Path, public_key: Path, *, stdlib_only: bool = False
) -> subprocess.CompletedProcess[str]:
    """``chain_verify`` run from ``verifier`` (its only PYTHONPATH, its working directory), baton blocked."""
    blocked = "sys.modules['baton'] = None\n"
    if stdlib_only:
        blocked += "sys.modules['cryptography'] = None\n"
    return subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_COPY.format(blocked=blocked),
            str(export),
            "--public-key",
            str(public_key),
        ],
        env={"PYTHONPATH": str(verifier), "PATH": "/usr/bin:/bin"},
        cwd=verifier,
        capture_output=True,
        text=True,
        check=False,
    )
