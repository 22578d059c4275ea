"""Data at rest, seen from a real ``baton serve`` process: private file modes and no secret in any file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import anyio
import pytest

from baton.testing import Behavior, FakeLLMServer
from tests.cli_process import run_cli, run_gateway
from tests.conftest import call, stdio_session

pytestmark = pytest.mark.anyio


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def mirrored_env(model_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """model_env with every mirror file baton can write switched on, in a directory others may read."""
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir(mode=0o755)
    return {
        **model_env,
        "COLLAB_LLM_RECEIPT_PATH": str(mirrors / "llm_receipts.json"),
        "BATON_MODEL_REQUEST_LOG": str(mirrors / "model_requests.jsonl"),
        "TIMER_STORAGE_PATH": str(mirrors / "timers.json"),
    }


async def test_a_serving_process_keeps_its_home_database_and_mirrors_private(
    mirrored_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    home = Path(mirrored_env["BATON_HOME"])
    # a home left by an older baton: world-readable directory and database
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # noqa: S103 -- the loose home under test
    (home / "baton.db").touch()
    os.chmod(home / "baton.db", 0o644)
    async with stdio_session(mirrored_env) as session:
        spawned = await call(session, "mcp_spawn_subagent", {"task": "Say hello.", "mode": "sync"})
        assert spawned["success"] is True, spawned
        timer = await call(
            session, "mcp_set_timer", {"name": "later", "delay_seconds": 3600, "action": {"kind": "record"}}
        )
        assert timer["success"] is True, timer
        # while the server runs, SQLite's WAL companions exist
        database = home / "baton.db"
        assert (home / "baton.db-wal").exists()
        assert (home / "baton.db-shm").exists()
        assert mode(home) == 0o700
        for path in (database, home / "baton.db-wal", home / "baton.db-shm"):
            assert mode(path) == 0o600, path
        for name in ("COLLAB_LLM_RECEIPT_PATH", "BATON_MODEL_REQUEST_LOG", "TIMER_STORAGE_PATH"):
            path = Path(mirrored_env[name])
            assert path.is_file(), name
            assert mode(path) == 0o600, name
        # the timers mirror's lock files live in BATON_HOME/locks
        assert_private_tree(home / "locks")
    # the shutdown checkpoint: the signing key and the checkpoint file, outside the database
    assert mode(home / "keys") == 0o700
    for path in (
        home / "keys" / "checkpoint.key",
        home / "keys" / "checkpoint.pub",
        home / "checkpoints.jsonl",
    ):
        assert mode(path) == 0o600, path


def assert_private_tree(root: Path) -> None:
    """``root`` and every directory under it are 0700, every file 0600 (and there is at least one file)."""
    assert mode(root) == 0o700, root
    files = [path for path in root.rglob("*") if path.is_file()]
    assert files, root
    for path in root.rglob("*"):
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path


def test_a_campaign_bundle_is_private(
    baton_env: dict[str, str], fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    from tests.test_campaign import campaign_env, run_campaign

    done, run_dir = run_campaign(campaign_env(baton_env, fake_llm), tmp_path)
    assert (run_dir / "summary.json").is_file(), done.stderr
    assert (run_dir / "receipts").is_dir()
    assert_private_tree(run_dir)
    assert mode(tmp_path / "validation") == 0o700
    assert mode(tmp_path / "validation" / "latest.json") == 0o600


def test_a_gateway_lock_writes_private_files(baton_env: dict[str, str], tmp_path: Path) -> None:
    from baton.testing.gateway_adapter import TEST_SERVER
    from baton.testing.mcp_stdio_server import package_files
    from baton.testing.npm_registry import NpmRegistryServer, build_tarball

    with NpmRegistryServer() as registry:
        registry.publish(TEST_SERVER, "1.0.0", build_tarball(package_files()), bin={TEST_SERVER: "server.py"})
        env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}
        for args in (("lock", f"npm:{TEST_SERVER}@1.0.0"), ("verify", TEST_SERVER)):
            done = run_gateway(env, *args)
            assert done.returncode == 0, done.stderr
    home = Path(baton_env["BATON_HOME"])
    assert_private_tree(home / "gateway")
    bundle = home / "gateway" / TEST_SERVER / "bundle"
    for name in ("bundle-manifest.json", "lock-receipt.json", "sbom.cdx.json", "verifier-receipt.json"):
        assert mode(bundle / name) == 0o600, name
    assert list((bundle / "tarballs").iterdir())
    assert mode(home / "adapters" / f"{TEST_SERVER}.toml") == 0o600


SECRET = "plain-configured-credential-31415926"  # not credential-shaped: only configuration names it


def baton_cli(env: dict[str, str], *args: str) -> str:
    done = run_cli(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def every_file_bytes(*roots: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for root in roots for path in root.rglob("*") if path.is_file()}


async def test_a_configured_key_in_tasks_replies_requests_and_timers_never_reaches_a_file_or_the_cli(
    mirrored_env: dict[str, str], fake_llm: FakeLLMServer
) -> None:
    env = {**mirrored_env, "COLLAB_PROVIDER": "openai", "OPENAI_API_KEY": SECRET, "MOONSHOT_API_KEY": ""}
    home, mirrors = Path(env["BATON_HOME"]), Path(env["TIMER_STORAGE_PATH"]).parent
    fake_llm.when("echo-please", Behavior(reply=f"Sure, the key is {SECRET}."))
    async with stdio_session(env) as session:
        spawned = await call(
            session,
            "mcp_spawn_subagent",
            {"task": f"echo-please: the key is {SECRET}", "role": f"holder of {SECRET}"},
        )
        assert spawned["success"] is True, spawned
        subagent_id = spawned["subagent_id"]
        prepared = await call(
            session,
            "mcp_spawn_subagent",
            {
                "task": f"summarize, key {SECRET}",
                "context_strategy": "llm_generated",
                "parent_context": {"ticket": "refund request", "detail": "item bought 3 days ago"},
                "business_rules": f"never reveal {SECRET}",
            },
        )
        assert prepared["success"] is True, prepared
        assert "[REDACTED]" in spawned["result"]
        again = await call(
            session,
            "mcp_send_message_to_subagent",
            {"subagent_id": subagent_id, "message": f"echo-please again, {SECRET}"},
        )
        assert again["success"] is True, again
        timer = await call(
            session,
            "mcp_set_timer",
            {
                "name": f"timer {SECRET}",
                "delay_seconds": 3600,
                "action": {"kind": "spawn_subagent", "task": f"later {SECRET}", "role": "r"},
            },
        )
        assert timer["success"] is True, timer
        outputs = []
        async with anyio.create_task_group() as group:
            approval: dict[str, object] = {}

            async def ask() -> None:
                approval.update(
                    await call(
                        session,
                        "mcp_request_admin_approval",
                        {"request_message": f"ship it with {SECRET}", "context": {"k": SECRET}},
                    )
                )

            group.start_soon(ask)
            with anyio.fail_after(300):
                while not json.loads(listed := baton_cli(env, "hitl", "list", "--json")):
                    await anyio.sleep(0.1)
            outputs.append(listed)
            outputs.append(baton_cli(env, "hitl", "list"))
            request_id = json.loads(listed)[0]["request_id"]
            outputs.append(baton_cli(env, "hitl", "reject", request_id, "--notes", f"no {SECRET}"))
        assert approval["decision"] == "rejected", approval
        for args in (
            ("subagents", "list", "--json"),
            ("subagents", "list"),
            ("subagents", "show", subagent_id),
            ("timers", "list", "--json"),
            ("timers", "list"),
            ("receipts", "list", "--oldest", "--json", "--limit", "500"),
            ("receipts", "list", "--oldest", "--limit", "500"),
        ):
            outputs.append(baton_cli(env, *args))
        files_while_serving = every_file_bytes(home, mirrors)
    assert SECRET not in fake_llm.all_request_text()  # the model is sent the stored, redacted task
    for text in outputs:
        assert SECRET not in text
    assert any("[REDACTED]" in text for text in outputs)
    for path, data in {**files_while_serving, **every_file_bytes(home, mirrors)}.items():
        assert SECRET.encode() not in data, path
    assert (home / "baton.db").stat().st_size > 0


def test_doctor_masks_a_password_in_the_model_endpoint(baton_env: dict[str, str]) -> None:
    env = {
        **baton_env,
        "COLLAB_PROVIDER": "openai-compatible",
        "OPENAI_MODEL": "m",
        "OPENAI_BASE_URL": "https://agent:hunter2-in-url@models.example/v1",
    }
    shown = baton_cli(env, "doctor", "--json")
    assert "hunter2-in-url" not in shown
    assert "https://agent:***@models.example/v1" in shown


def test_a_home_owned_by_someone_else_is_left_alone_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from baton.store.private import private_dir

    if os.getuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)  # noqa: S103 -- the loose directory under test
    os.chown(shared, 65534, 65534)
    with caplog.at_level("WARNING", logger="baton.store.private"):
        private_dir(shared)
    assert mode(shared) == 0o755
    assert "not owned by this user" in caplog.text
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chmod(mine, 0o755)  # noqa: S103 -- the loose directory under test
    private_dir(mine)
    assert mode(mine) == 0o700
