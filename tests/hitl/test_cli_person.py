"""A person on the CLI is the OS account of the real uid, once: ``LOGNAME``/``USER`` name nobody.

Each decision is a real ``python -m baton hitl approve`` process; the environment claims a name, the uid
(this test's own) decides who it is."""

from __future__ import annotations

import json
import os
import pwd
import subprocess

import anyio
import pytest

from baton.hitl.broker import HitlBroker, NewRequest
from baton.hitl.records import Decision
from baton.runtime import Runtime
from tests.cli_process import run_cli

pytestmark = pytest.mark.anyio

#: The OS account this test (and every CLI process it starts) runs as.
ME = pwd.getpwuid(os.getuid()).pw_name


def approve_claiming(env: dict[str, str], name: str, request_id: str) -> subprocess.CompletedProcess[str]:
    """``baton hitl approve ID`` from this uid, with the environment claiming to be ``name``."""
    return run_cli({**env, "LOGNAME": name, "USER": name}, "hitl", "approve", request_id)


async def _approve(env: dict[str, str], name: str, request_id: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(approve_claiming, env, name, request_id)


async def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: run_cli(env, *args))


async def test_one_shell_claiming_three_names_counts_once_in_a_quorum(
    baton_env: dict[str, str], broker: HitlBroker
) -> None:
    view = await broker.create(NewRequest("approval", "Drop it", timeout_seconds=600, required_approvals=3))
    request_id = view["request_id"]
    first = await _approve(baton_env, "p1", request_id)
    assert first.returncode == 0, first.stderr
    for name in ("p2", "p3"):
        again = await _approve(baton_env, name, request_id)
        assert again.returncode == 1 and "hitl_approval_duplicate" in again.stderr, again.stdout
    after = broker.get(request_id)
    assert (after["status"], after["approvals"]) == ("pending", [ME])
    (partial,) = broker.runtime.receipts.list(kind="hitl_partial_approval")
    assert partial.payload["decided_by"] == ME and partial.payload["approvers"] == [ME]


async def test_an_enrolled_name_is_the_os_accounts_only_when_the_operator_linked_it(
    baton_env: dict[str, str], broker: HitlBroker, runtime: Runtime
) -> None:
    assert (await _cli(baton_env, "people", "add", "alice")).returncode == 0
    view = await broker.create(NewRequest("approval", "Pay", timeout_seconds=600, required_approvals=2))
    request_id = view["request_id"]
    claimed = await _approve(baton_env, "alice", request_id)
    assert claimed.returncode == 0, claimed.stderr
    assert broker.get(request_id)["approvals"] == [ME]  # recorded as the uid's account, never as alice
    done = broker.respond(request_id, Decision(True, via="passkey", decided_by="alice"))
    assert (done["status"], done["decided_by"]) == ("approved", f"{ME}, alice")  # alice's vote still counts

    assert (await _cli(baton_env, "people", "add", ME)).returncode == 0
    second = await broker.create(NewRequest("approval", "Pay again", timeout_seconds=600))
    refused = await _approve(baton_env, ME, second["request_id"])
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith("hitl_decider_not_authorized: ")
    assert f"baton people link-os {ME} {ME}" in refused.stderr
    assert broker.get(second["request_id"])["status"] == "pending"

    linked = await _cli(baton_env, "people", "link-os", ME, ME)
    assert (
        linked.returncode == 0 and f"Linked the OS account {ME} (uid {os.getuid()}) to {ME}." in linked.stdout
    )
    listed = json.loads((await _cli(baton_env, "people", "list", "--json")).stdout)
    assert {p["name"]: p["os"] for p in listed} == {"alice": [], ME: [ME]}
    assert (await _approve(baton_env, "mallory", second["request_id"])).returncode == 0
    assert broker.get(second["request_id"])["decided_by"] == ME
    (receipt,) = runtime.receipts.list(kind="os_account_linked")
    assert receipt.payload == {**receipt.payload, "person": ME, "os_user": ME, "os_uid": os.getuid()}
    taken = await _cli(baton_env, "people", "link-os", "alice", ME)
    assert taken.returncode == 1 and "os_account_taken" in taken.stderr
    unlinked = await _cli(baton_env, "people", "unlink-os", ME)
    assert unlinked.returncode == 0 and len(runtime.receipts.list(kind="os_account_unlinked")) == 1
    unknown = await _cli(baton_env, "people", "link-os", "alice", "no-such-account-here")
    assert unknown.returncode == 1 and "os_account_not_found" in unknown.stderr


async def test_a_claimed_name_does_not_get_round_owner_exclusion(baton_env: dict[str, str]) -> None:
    env = {**baton_env, "BATON_HITL_EXCLUDE_OWNER": "1"}
    assert (await _cli(env, "people", "add", ME, "--owns", "build-bot")).returncode == 0
    from baton.config import load_settings
    from baton.hitl.broker import get_broker

    runtime = Runtime.open(load_settings(env))
    try:
        broker = get_broker(runtime)
        view = await broker.create(NewRequest("approval", "Deploy", timeout_seconds=600, agent="build-bot"))
        request_id = view["request_id"]
        unlinked = await _approve(env, "ada-laptop", request_id)
        assert unlinked.returncode == 1 and "hitl_decider_not_authorized" in unlinked.stderr
        assert (await _cli(env, "people", "link-os", ME, ME)).returncode == 0
        owner = await _approve(env, "ada-laptop", request_id)
        assert owner.returncode == 1 and owner.stderr.startswith("hitl_owner_excluded: "), owner.stderr
        assert broker.get(request_id)["status"] == "pending"
    finally:
        runtime.close()
