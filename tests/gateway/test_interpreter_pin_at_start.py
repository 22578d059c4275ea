"""The pinned interpreter is checked again at every upstream start, not only when ``baton serve`` extracts.

The adapter's entrypoint is an interpreter the test controls: ``DIR/python3``, a symlink to the host's
python, in a directory the sandbox sees at the same path (a read-only mount). Lock pins it (its real path,
version and sha256). A real ``baton serve`` starts the upstream once; the upstream crashes; the test
replaces ``DIR/python3`` by a launcher script (another real path, other bytes); the next start is refused
with ``adapter_runtime_drift``, the adapter is blocked, and a ``gateway_failure`` receipt says why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton.config import load_settings
from baton.gateway.policy.policy_files import load_policy
from baton.gateway.policy.policy_runtime import Mount
from baton.gateway.sandbox.interpreter import SANDBOX_SEARCH_PATH, observe
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import baton_environ, call, stdio_session
from tests.needs import in_ci

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

#: Parents a directory both the host and the sandbox can name may live in: not /tmp (the sandbox's own
#: tmpfs), not a system tree, not a sandbox directory.
PARENTS = (Path.home(), Path("/srv"), Path("/mnt"), Path("/opt"))


def _allowed(parent: Path) -> bool:
    if not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        return False
    probe = str(parent / "baton-probe")
    try:
        Mount(host=probe, sandbox=probe, mode="ro")
    except ValueError:
        return False
    return True


@pytest.fixture
def interpreter_dir() -> Iterator[Path]:
    """A directory at the same path on the host and in the sandbox, readable by the sandbox's user."""
    parent = next((p for p in PARENTS if _allowed(p)), None)
    if parent is None:
        message = f"no writable directory outside /tmp and the system trees among {[str(p) for p in PARENTS]}"
        if in_ci():
            pytest.fail(f"CI needs one: {message}")
        pytest.skip(message)
    base = Path(tempfile.mkdtemp(prefix="baton-interpreter-", dir=parent))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_interpreter_changed_between_two_upstream_starts_blocks_the_next_start(
    tmp_path: Path, interpreter_dir: Path
) -> None:
    host_python = shutil.which("python3", path=SANDBOX_SEARCH_PATH)
    assert host_python is not None
    real_python = Path(host_python).resolve()
    python3 = interpreter_dir / "python3"
    python3.symlink_to(real_python)
    home = tmp_path / "home"
    env = baton_environ(home)
    with NpmRegistryServer() as registry, registry_runtime(home, registry) as runtime:
        draft = document(
            "pinned",
            publish(registry),
            [tool("echo", text="string"), tool("crash")],
            entrypoint=[str(python3), "node_modules/baton-test-mcp/server.py"],
            mounts=[{"host": str(interpreter_dir), "sandbox": str(interpreter_dir), "mode": "ro"}],
        )
        draft["interpreter"] = observe(str(python3))  # what `lock --entrypoint` pins for a named one
        path = make_live(runtime, draft, allowed=["echo", "crash"])
    pinned, _ = load_policy(path)
    assert pinned.interpreter is not None and pinned.interpreter.command == str(python3)
    assert pinned.interpreter.path == str(real_python)  # lock pinned what the symlink pointed at

    async with stdio_session(env) as session:
        first = await call(session, "pinned__echo", {"text": "first start"})
        assert first["success"] and first["text"] == "first start", first
        assert (await call(session, "pinned__crash"))["error_class"] == "mcp_upstream_failed"
        # between the two starts the interpreter the entrypoint names becomes other bytes at another path
        launcher = interpreter_dir / "python3.new"
        launcher.write_text(f'#!/bin/sh\nexec {real_python} "$@"\n', encoding="utf-8")
        launcher.chmod(0o755)
        launcher.replace(python3)
        with anyio.fail_after(300):
            refused = await call(session, "pinned__echo", {"text": "second start"})
        assert refused.get("error_class") == "adapter_runtime_drift", refused
        assert "second start" not in str(refused)
        adapters = {a["adapter_id"]: a for a in (await call(session, "mcp_list_adapters"))["adapters"]}
        assert adapters["pinned"]["state"] == "blocked", adapters["pinned"]
        assert adapters["pinned"]["block_error_class"] == "adapter_runtime_drift"
        assert adapters["pinned"]["upstream_starts"] == 2  # the refused start was the second
        # the block holds: the next call is refused without any start
        again = await call(session, "pinned__echo", {"text": "third"})
        assert again.get("error_class") in ("adapter_runtime_drift", "adapter_not_promoted"), again

    runtime = Runtime.open(load_settings(env))
    try:
        failures = [r.payload for r in runtime.receipts.list(kind="gateway_failure", limit=1000)]
    finally:
        runtime.close()
    drift = [f for f in failures if f.get("error_class") == "adapter_runtime_drift"]
    assert len(drift) == 1, failures
    assert drift[0]["stage"] == "runtime"
    assert "path" in drift[0]["error"] and "sha256" in drift[0]["error"], drift[0]
    assert drift[0]["policy_checksum"]
