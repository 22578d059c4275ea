"""A killed lock's temp directory is swept by the next lock: baton's scratch directories live in its own
``baton-UID`` directory of the temp dir, named after the process that made them."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway

from .conftest import TEST_SERVER

pytestmark = [pytest.mark.needs("node"), pytest.mark.timeout(600)]


def test_the_next_lock_sweeps_what_a_dead_lock_left_and_keeps_a_live_one(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
    temp = Path(tempfile.mkdtemp(prefix="baton-sweep-test-"))
    temp.chmod(0o755)
    own = temp / f"baton-{os.geteuid()}"
    own.mkdir(mode=0o711)
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = own / f"baton-npm-lock-{dead.pid}-killed"  # what a lock killed mid-resolution leaves
    (left / "cache").mkdir(parents=True)
    (left / "cache" / "blob").write_bytes(b"\0" * (1 << 20))
    legacy = temp / f"baton-replay-{dead.pid}-older"  # where an older baton put its trees
    legacy.mkdir()
    alive = own / f"baton-npm-lock-{os.getpid()}-running"  # a lock still running (this process)
    alive.mkdir()
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url, "TMPDIR": str(temp)}
    entry = f"python3 node_modules/{TEST_SERVER}/server.py"
    done = run_gateway(env, "lock", f"npm:{TEST_SERVER}", "--id", "demo", "--entrypoint", entry)
    assert done.returncode == 0, done.stderr
    assert not left.exists() and not legacy.exists()
    assert alive.exists()
    assert sorted(p.name for p in own.iterdir()) == [alive.name], "the lock's own scratch is gone too"
    assert oct(own.stat().st_mode & 0o777) == oct(0o711)
    alive.rmdir()
    own.rmdir()
    temp.rmdir()
