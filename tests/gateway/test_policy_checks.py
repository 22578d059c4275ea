"""The reference controller's policy checks, the interpreter pin, check's re-verification, live re-locks,
and no traceback from any ``baton gateway`` command on malformed input."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from baton.config import load_settings
from baton.errors import GatewayError
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy import bookkeeping, state
from baton.gateway.policy.checks import destructive_reason
from baton.gateway.policy.operator_lock import operator_lock
from baton.gateway.policy.policy_files import load_policy, parse_policy, write_policy
from baton.gateway.replay.replay import replay
from baton.gateway.serving.promotion import demote, promote
from baton.runtime import Runtime
from baton.testing.gateway_adapter import TEST_SERVER, document, make_live, publish, tool
from baton.testing.mcp_stdio_server import package_files
from baton.testing.npm_registry import NpmRegistryServer, build_tarball
from tests.cli_process import run_gateway
from tests.conftest import baton_environ, call, stdio_session

needs_bwrap = pytest.mark.needs("bwrap")


def edit(path: Path, change: Any) -> None:
    """Rewrite a policy file's TOML through ``change(document)``."""
    raw = tomllib.loads(path.read_text())
    change(raw)
    path.write_text(tomli_w.dumps(raw))


@pytest.mark.parametrize(
    ("name", "annotations", "destructive"),
    [
        ("write_file", None, True),
        ("deleteEntities", None, True),
        ("browser_run_code", None, True),
        ("kill-process", None, True),
        ("create_directory", None, True),
        ("move_file", None, True),
        ("read_file", None, False),
        ("get_current_time", None, False),
        ("settings", None, False),
        ("frobnicate", {"destructiveHint": True}, True),
        ("write_note", {"readOnlyHint": True}, False),
    ],
)
def test_destructive_tools_are_recognised_by_name_and_annotation(
    name: str, annotations: dict[str, Any] | None, destructive: bool
) -> None:
    assert (destructive_reason(name, annotations) is not None) is destructive


@needs_bwrap
def test_an_allowed_destructive_tool_needs_approval_or_an_explicit_exemption(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = publish(registry)
    tools = [tool("echo", text="string"), tool("delete_everything"), tool("frobnicate")]
    tools[2]["annotations"] = {"destructiveHint": True}
    with pytest.raises(GatewayError) as info:
        make_live(runtime, document("gated", tarball, tools), allowed=["echo", "delete_everything"])
    assert info.value.error_class == "adapter_destructive_tool_unapproved"
    assert info.value.details["tools"] == ["delete_everything"]
    with pytest.raises(GatewayError) as info:
        make_live(runtime, document("hinted", tarball, tools), allowed=["frobnicate"])
    assert info.value.error_class == "adapter_destructive_tool_unapproved"
    path = make_live(
        runtime,
        document("approved", tarball, tools),
        allowed=["echo", "delete_everything"],
        approval_required=["delete_everything"],
    )
    assert stages.check(runtime, "approved")["status"] == "completed_check_mode_no_runtime_execution"

    # the owner's explicit exemption is honoured, and check applies the same rule as replay
    def exempt(raw: dict[str, Any]) -> None:
        raw["tools"]["approval_required"] = []
        raw["tools"]["allow_destructive_without_approval"] = ["delete_everything"]

    edit(path, exempt)
    assert stages.check(runtime, "approved")["status"] == "completed_check_mode_no_runtime_execution"
    edit(path, lambda raw: raw["tools"].update(allow_destructive_without_approval=[]))
    with pytest.raises(GatewayError) as info:
        stages.check(runtime, "approved")
    assert info.value.error_class == "adapter_destructive_tool_unapproved"


def test_check_reverifies_the_tarballs_so_tampering_after_verify_fails_check(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = publish(registry)
    policy = parse_policy(document("tamper", tarball, [tool("echo", text="string")]))
    write_policy(runtime.settings.home / "adapters" / "tamper.toml", policy)
    artifacts.lock(runtime, "tamper")
    stages.verify(runtime, "tamper")
    assert stages.check(runtime, "tamper")["status"] == "completed_check_mode_no_runtime_execution"
    target = state.adapter_dir(runtime, "tamper") / "bundle" / "tarballs" / f"{TEST_SERVER}-1.0.0.tgz"
    target.write_bytes(target.read_bytes() + b"\0")
    with pytest.raises(GatewayError) as info:
        stages.check(runtime, "tamper")
    assert info.value.error_class == "artifact_tarball_checksum_mismatch"


@needs_bwrap
def test_interpreter_drift_blocks_replay(runtime: Runtime, registry: NpmRegistryServer) -> None:
    tarball = publish(registry)
    path = make_live(runtime, document("pinned", tarball, [tool("echo", text="string")]), allowed=["echo"])
    policy, _ = load_policy(path)
    assert policy.interpreter is not None
    assert policy.interpreter.path == str(Path(policy.interpreter.path).resolve())
    assert len(policy.interpreter.sha256) == 64
    edit(path, lambda raw: raw["interpreter"].update(sha256="0" * 64))
    with pytest.raises(GatewayError) as info:
        replay(runtime, "pinned", apply=True)
    assert info.value.error_class == "adapter_runtime_drift"
    assert "sha256" in info.value.message
    with pytest.raises(GatewayError) as info:
        stages.check(runtime, "pinned")
    assert info.value.error_class == "adapter_runtime_drift"


def next_version(registry: NpmRegistryServer, path: Path, tools: list[dict[str, Any]]) -> None:
    """Publish version 1.1.0 of the test server and point the policy at it, with ``tools``; unpinned."""
    tarball = build_tarball(package_files(version="1.1.0"))
    registry.publish(TEST_SERVER, "1.1.0", tarball, bin={TEST_SERVER: "server.py"})

    def change(raw: dict[str, Any]) -> None:
        raw["artifacts"][0].update(version="1.1.0", sha512=hashlib.sha512(tarball).hexdigest())
        raw["runtime"]["env"]["BATON_TEST_MCP_TOOLS"] = json.dumps(tools)
        raw["adapter"]["candidate"] = f"npm:{TEST_SERVER}@1.1.0"
        raw.pop("contract", None)
        raw["tools"] = {"allowed": [], "denied": []}

    edit(path, change)


def served(runtime: Runtime, adapter_id: str) -> tuple[str, str | None, str | None]:
    """(state shown, stage of the next version, served policy checksum) of one adapter."""
    row = {r["adapter_id"]: r for r in bookkeeping.list_view(runtime)}[adapter_id]
    stored = state.get_adapter(runtime, adapter_id)
    assert stored is not None
    return row["state"], row["next_version_state"], stored["serving_policy_checksum"]


@needs_bwrap
@pytest.mark.anyio
async def test_a_live_adapter_is_relocked_in_place_and_serves_its_version_until_the_next_is_promoted(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = publish(registry)
    path = make_live(runtime, document("live", tarball, [tool("echo", text="string")]), allowed=["echo"])
    first = served(runtime, "live")
    assert first[:2] == ("promoted", None)
    env = baton_environ(runtime.settings.home, BATON_NPM_REGISTRY=registry.url)
    async with stdio_session(env) as session:
        assert (await call(session, "live__echo", {"text": "v1"}))["success"]

        # a failed re-lock (the registry now serves other bytes) blocks the next version, not the served one
        registry.replace_tarball(f"{TEST_SERVER}-1.0.0.tgz", tarball + b"changed")
        with pytest.raises(GatewayError) as info:
            artifacts.lock(runtime, "live")
        assert info.value.error_class == "artifact_integrity_mismatch"
        assert served(runtime, "live") == ("promoted", "blocked", first[2])
        assert runtime.receipts.list(kind="gateway_failure")[-1].payload["serving_unchanged"] is True
        assert (await call(session, "live__echo", {"text": "v1 after a failed re-lock"}))["success"]
        registry.replace_tarball(f"{TEST_SERVER}-1.0.0.tgz", tarball)

        # the next version goes through lock, verify and replay in place while the current one serves
        next_version(registry, path, [tool("echo", text="string"), tool("shout", text="string")])
        artifacts.lock(runtime, "live")
        assert served(runtime, "live") == ("promoted", "locked", first[2])
        receipt = state.adapter_dir(runtime, "live") / "bundle" / "lock-receipt.json"
        receipt.write_bytes(receipt.read_bytes() + b" ")
        with pytest.raises(GatewayError):  # a failed verify of the next version leaves the current one
            stages.verify(runtime, "live")
        assert served(runtime, "live") == ("promoted", "blocked", first[2])
        artifacts.lock(runtime, "live")
        stages.verify(runtime, "live")
        replay(runtime, "live", apply=True, record=True)
        edit(path, lambda raw: raw["tools"].update(allowed=["echo", "shout"], denied=[]))
        replay(runtime, "live", apply=True)
        assert served(runtime, "live") == ("promoted", "replayed", first[2])
        assert (await call(session, "live__echo", {"text": "still v1"}))["success"]
        assert "live__shout" not in {t.name for t in (await session.list_tools()).tools}

        # promotion swaps the served version, and the running server serves the new one at once
        promote(runtime, "live")
        second = served(runtime, "live")
        assert second[:2] == ("promoted", None) and second[2] != first[2]
        assert "live__shout" in {t.name for t in (await session.list_tools()).tools}
        assert (await call(session, "live__shout", {"text": "v2"}))["success"]
    snapshots = list((state.adapter_dir(runtime, "live") / "serving").iterdir())
    assert [s.name for s in snapshots] == [second[2].removeprefix("sha256:")]


def test_a_failed_relock_leaves_the_previous_bundle_and_policy_untouched(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = publish(registry)
    path = runtime.settings.home / "adapters" / "keep.toml"
    write_policy(path, parse_policy(document("keep", tarball, [tool("echo", text="string")])))
    artifacts.lock(runtime, "keep")
    bundle = state.adapter_dir(runtime, "keep") / "bundle"
    files = {p.name: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    policy_text = path.read_text()
    registry.replace_tarball(f"{TEST_SERVER}-1.0.0.tgz", tarball + b"changed")
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "keep")
    assert info.value.error_class == "artifact_integrity_mismatch"
    assert {p.name: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == files
    assert path.read_text() == policy_text
    assert not bundle.with_name("bundle.staging").exists()


@pytest.mark.parametrize(
    ("runtime_fields", "error_class"),
    [
        ({"entrypoint": ["node", "-e", "require('child_process')"]}, "entrypoint_not_allowlisted"),
        ({"entrypoint": ["python3", "-c", "import os"]}, "entrypoint_not_allowlisted"),
        ({"entrypoint": ["bash", f"node_modules/{TEST_SERVER}/server.py"]}, "entrypoint_not_allowlisted"),
        ({"entrypoint": ["python3", "node_modules/other-package/x.py"]}, "entrypoint_not_allowlisted"),
        (
            {"entrypoint": ["python3", f"node_modules/{TEST_SERVER}/../../etc/x.py"]},
            "entrypoint_not_allowlisted",
        ),
        ({"arguments": ["/etc/shadow"]}, "arguments_not_allowlisted"),
        ({"arguments": ["--root=/root"]}, "arguments_not_allowlisted"),
        ({"arguments": ["--config", "/proc/1/environ"]}, "arguments_not_allowlisted"),
        ({"arguments": ["/work/../etc"]}, "arguments_not_allowlisted"),
        ({"arguments": ["a\nb"]}, "arguments_not_allowlisted"),
    ],
)
def test_entrypoint_and_arguments_are_allow_listed(
    runtime: Runtime, registry: NpmRegistryServer, runtime_fields: dict[str, Any], error_class: str
) -> None:
    tarball = publish(registry)
    draft = document("shape", tarball, [tool("echo", text="string")])
    draft["runtime"].update(runtime_fields)
    write_policy(runtime.settings.home / "adapters" / "shape.toml", parse_policy(draft))
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "shape")
    assert info.value.error_class == error_class


MALFORMED_POLICIES = [
    b"\xff\xfe not utf-8",
    b"[adapter\nid = ",
    b'adapter = "a string"',
    b"[adapter]\nid = 1\n[[artifacts]]\nname = []\n",
    b'[adapter]\nid="x"\ncandidate="npm:x"\nrisk_class="high"\nowner="o"\nexpires_at=2030-01-01T00:00:00Z\n',
    tomli_w.dumps({"adapter": {"id": "deep"}, "runtime": {"entrypoint": [[[]]] * 3}}).encode(),
    json.dumps({"a": 1}).encode(),
]


def gateway_env(tmp_path: Path, registry: NpmRegistryServer) -> dict[str, str]:
    """The environment of a user whose registries are the loopback one."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("BATON_")},
        "BATON_HOME": str(tmp_path / "home"),
        "BATON_NPM_REGISTRY": registry.url,
        "BATON_PYPI_URL": registry.url,
    }


def assert_typed_failures(env: dict[str, str], calls: list[list[str]]) -> None:
    """Each call exits 1 with a typed error on stderr and no traceback anywhere (four at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: (args, run_gateway(env, *args)), calls))
    for args, done in results:
        output = done.stdout + done.stderr
        assert "Traceback" not in output, (args, output[-2000:])
        assert done.returncode == 1, (args, output[-500:])
        assert done.stderr.strip(), args


def test_no_gateway_command_prints_a_traceback_on_malformed_candidates_or_registry_answers(
    tmp_path: Path, registry: NpmRegistryServer
) -> None:
    registry.serve_raw("garbled", b"\x00\x01 not json")
    registry.serve_raw("odd", {"name": "odd", "versions": {"1.0.0beta": None, "1": []}, "dist-tags": 7})
    registry.serve_raw("pypi/odd/1/json", {"urls": "nope"})
    registry.serve_raw("simple/odd/", b"<html>")
    env = gateway_env(tmp_path, registry)
    assert_typed_failures(
        env,
        [
            ["lock", "npm:garbled"],
            ["lock", "npm:odd"],
            ["lock", "npm:odd@1.0.0beta"],
            ["lock", "pypi:odd==1"],
            ["lock", "npm:a@file:/etc"],
            ["lock", "npm:" + "a" * 5000],
            ["verify", "no-such-adapter"],
            ["check", "../../etc/passwd"],
            ["replay", "BAD ID", "--apply"],
            ["promote", "/nonexistent/x.toml"],
            ["demote", "nobody"],
        ],
    )
    listed = run_gateway(env, "list", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr


def test_no_gateway_command_prints_a_traceback_on_malformed_policies(
    tmp_path: Path, registry: NpmRegistryServer
) -> None:
    calls = []
    for index, content in enumerate(MALFORMED_POLICIES):
        policy = tmp_path / f"malformed-{index}.toml"
        policy.write_bytes(content)
        calls += [["lock", str(policy)]] + ([["replay", str(policy), "--apply"]] if index < 3 else [])
    assert_typed_failures(gateway_env(tmp_path, registry), calls)


@needs_bwrap
def test_a_drafts_first_replay_pins_the_older_protocol_a_server_negotiates(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = publish(registry)
    draft = document(
        "older", tarball, [tool("echo", text="string")], env={"BATON_TEST_MCP_PROTOCOL": "2024-11-05"}
    )
    path = runtime.settings.home / "adapters" / "older.toml"
    write_policy(path, parse_policy(draft))
    artifacts.lock(runtime, "older")
    stages.verify(runtime, "older")
    first = replay(runtime, "older", apply=True, record=True)
    policy, _ = load_policy(path)
    assert policy.client.protocol_version == "2024-11-05"
    assert policy.contract is not None and policy.contract.protocol_version == "2024-11-05"
    assert replay(runtime, "older", apply=True)["protocol_observation"] == first["protocol_observation"]
    # a pinned adapter never negotiates: the server moving to another version is drift
    edit(path, lambda raw: raw["runtime"]["env"].update(BATON_TEST_MCP_PROTOCOL="2025-03-26"))
    with pytest.raises(GatewayError) as info:
        replay(runtime, "older", apply=True, record=True)
    assert info.value.error_class == "mcp_initialize_contract_mismatch"


@needs_bwrap
def test_a_snapshot_links_only_the_bundles_packages_even_under_a_home_in_a_tarballs_folder(
    tmp_path: Path, registry: NpmRegistryServer
) -> None:
    """The serving snapshot hard-links the bundle's tarballs (never rewritten) and copies the rest, whose
    receipts verify rewrites in place; a folder named ``tarballs`` above BATON_HOME changes nothing."""
    home = tmp_path / "tarballs" / "home"
    settings = {"BATON_HOME": str(home), "BATON_NPM_REGISTRY": registry.url}
    runtime = Runtime.open(load_settings(settings))
    try:
        make_live(
            runtime, document("snap", publish(registry), [tool("echo", text="string")]), allowed=["echo"]
        )
        bundle = state.adapter_dir(runtime, "snap") / "bundle"
        (serving,) = [p for p in (state.adapter_dir(runtime, "snap") / "serving").iterdir()]
        linked, copied = [], []
        for source in sorted(p for p in bundle.rglob("*") if p.is_file()):
            served = serving / "bundle" / source.relative_to(bundle)
            same = os.path.samefile(source, served)
            (linked if same else copied).append(source.relative_to(bundle).parts[0])
        assert linked and set(linked) == {"tarballs"}
        assert copied and "tarballs" not in copied
    finally:
        runtime.close()


@needs_bwrap
def test_a_promote_or_demote_while_another_holds_the_adapter_is_refused_busy_and_changes_nothing(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    """Serving changes of one adapter take turns: one that finds the operator lock held is refused with
    ``adapter_busy`` before it writes or prunes anything, and runs once the lock is free."""
    make_live(runtime, document("turns", publish(registry), [tool("echo", text="string")]), allowed=["echo"])
    serving = state.adapter_dir(runtime, "turns") / "serving"
    (served,) = list(serving.iterdir())
    receipts_before = len(runtime.receipts.list())
    with operator_lock(runtime, "turns"):
        for command in (lambda: demote(runtime, "turns"), lambda: promote(runtime, "turns")):
            with pytest.raises(GatewayError) as busy:
                command()
            assert busy.value.error_class == "adapter_busy"
    assert list(serving.iterdir()) == [served]  # nothing pruned, nothing snapshotted
    assert len(runtime.receipts.list()) == receipts_before
    row = state.get_adapter(runtime, "turns")
    assert row is not None and row["state"] == "promoted"
    assert demote(runtime, "turns")["state"] == "replayed"  # free again: the demote runs
    assert not any(serving.iterdir())


@needs_bwrap
def test_a_lock_or_applied_replay_while_another_command_holds_the_adapter_is_refused_busy_and_records_nothing(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    """``lock`` rebuilds the bundle a promote snapshots and ``replay --apply`` records the replay a promote
    checks: both take the operator lock, and one that finds it held changes nothing, not even a failure
    receipt or a blocked state. A replay without ``--apply`` only reads, and takes no lock."""
    make_live(runtime, document("locks", publish(registry), [tool("echo", text="string")]), allowed=["echo"])
    adapter = state.adapter_dir(runtime, "locks")
    bundle_before = sorted((p.relative_to(adapter), p.stat().st_mtime_ns) for p in adapter.rglob("*"))
    receipts_before = len(runtime.receipts.list(limit=1000))
    with operator_lock(runtime, "locks"):
        for command in (
            lambda: artifacts.lock(runtime, "locks"),
            lambda: replay(runtime, "locks", apply=True),
        ):
            with pytest.raises(GatewayError) as busy:
                command()
            assert busy.value.error_class == "adapter_busy"
        assert replay(runtime, "locks")["status"] == "completed_check_mode_no_runtime_execution"
    assert sorted((p.relative_to(adapter), p.stat().st_mtime_ns) for p in adapter.rglob("*")) == bundle_before
    assert len(runtime.receipts.list(limit=1000)) == receipts_before
    row = state.get_adapter(runtime, "locks")
    assert row is not None and row["state"] == "promoted"
    relocked = artifacts.lock(runtime, "locks")  # free again: the lock runs
    assert relocked["adapter_id"] == "locks"
