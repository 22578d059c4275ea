"""People without a browser: the CLI, enrollment links, who decided, quorum rules, step-up at the broker,
owner exclusion, login off without anyone to log in, and the gateway's per-tool and per-risk settings."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import anyio
import httpx
import pytest

from baton.config import load_settings
from baton.errors import ArgumentError, BatonError, HitlError, PeopleError
from baton.hitl.broker import HitlBroker, get_broker
from baton.hitl.records import Decision, NewRequest, owner_excluded
from baton.identity.passkeys import StepUpProof
from baton.identity.people import People
from baton.runtime import Runtime
from tests.cli_process import run_cli

pytestmark = pytest.mark.anyio


def _params(link: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(link).query))


def test_people_add_list_remove_through_the_cli(baton_env: dict[str, str]) -> None:
    added = run_cli(baton_env, "people", "add", "alice", "--owns", "build-bot", "--url", "http://localhost:9")
    assert added.returncode == 0, added.stderr
    assert "http://localhost:9/inbox/enroll?p=alice&e=" in added.stdout
    listed = json.loads(run_cli(baton_env, "people", "list", "--json").stdout)
    assert [(p["name"], p["passkeys"], p["enrollment_open"], p["owns"]) for p in listed] == [
        ("alice", 0, True, ["build-bot"])
    ]
    again = run_cli(baton_env, "people", "add", "alice")
    assert again.returncode == 1 and "person_already_exists" in again.stderr
    reserved = run_cli(baton_env, "people", "add", "operator")
    assert reserved.returncode == 1 and "invalid_arguments" in reserved.stderr
    doctor = json.loads(run_cli(baton_env, "doctor", "--json").stdout)
    people_check = json.dumps(doctor)
    assert "alice (0 passkeys; enrollment link open; owns build-bot)" in people_check
    assert run_cli(baton_env, "people", "remove", "alice").returncode == 0
    assert json.loads(run_cli(baton_env, "people", "list", "--json").stdout) == []
    gone = run_cli(baton_env, "people", "remove", "alice")
    assert gone.returncode == 1 and "person_not_found" in gone.stderr


def test_an_enrollment_link_is_signed_expiring_single_and_dies_with_a_new_one_or_its_person(
    runtime: Runtime,
) -> None:
    people = People(runtime)
    people.add("bo")
    first = _params(people.enrollment_link("bo", "http://localhost:1"))
    assert people.check_enrollment(first) == ("bo", first["n"])
    forged = {**first, "s": "A" * 43}
    other_person = {**first, "p": "eve"}
    later = {**first, "e": str(int(first["e"]) + 1)}
    for params in (forged, other_person, later, {}):
        with pytest.raises(PeopleError) as refused:
            people.check_enrollment(params)
        assert refused.value.error_class == "enrollment_link_invalid"
    short = _params(people.enrollment_link("bo", "http://localhost:1", ttl_seconds=-1))
    with pytest.raises(PeopleError, match="expired"):
        people.check_enrollment(short)
    second = _params(people.enrollment_link("bo", "http://localhost:1"))
    with pytest.raises(PeopleError, match="already used or replaced"):
        people.check_enrollment(first)  # a new link replaces the open one
    with pytest.raises(PeopleError, match="already used or replaced"):
        people.register("bo", first["n"], b"cred", b"key", 0)
    people.remove("bo")
    with pytest.raises(PeopleError, match="already used or replaced"):
        people.check_enrollment(second)


async def test_the_operator_counts_once_and_a_link_cannot_make_up_a_quorum(broker: HitlBroker) -> None:
    view = await broker.create(NewRequest("approval", "Rotate", timeout_seconds=600, required_approvals=2))
    request_id = view["request_id"]
    with pytest.raises(HitlError) as by_link:
        broker.respond(request_id, Decision(approved=True, via="link"))
    assert by_link.value.error_class == "hitl_decider_not_authorized"
    partial = broker.respond(request_id, Decision(approved=True, via="admin_token"))
    assert (partial["status"], partial["approvals"], partial["decided_by"]) == ("pending", ["operator"], None)
    with pytest.raises(HitlError) as twice:  # the admin token over MCP is the same operator
        broker.respond(request_id, Decision(approved=True, via="mcp_admin"))
    assert twice.value.error_class == "hitl_approval_duplicate"
    done = broker.respond(request_id, Decision(approved=True, via="cli", decided_by="ana"))
    assert (done["status"], done["decided_by"], done["decided_via"]) == ("approved", "operator, ana", "cli")
    receipts = broker.runtime.receipts
    (partial_receipt,) = receipts.list(kind="hitl_partial_approval")
    assert partial_receipt.payload["decided_by"] == "operator" and partial_receipt.payload["approvals"] == 1
    decided = receipts.list(kind="hitl_decided")[-1].payload
    assert decided["approvers"] == ["operator", "ana"] and decided["required_approvals"] == 2

    rejected = await broker.create(NewRequest("approval", "Drop", timeout_seconds=600, required_approvals=3))
    broker.respond(rejected["request_id"], Decision(approved=True, via="cli", decided_by="ana"))
    final = broker.respond(rejected["request_id"], Decision(approved=False, via="link"))
    assert (final["status"], final["decided_by"]) == ("rejected", "link-holder")  # one rejection rejects


async def test_required_approvals_stay_within_the_operator_cap(baton_env: dict[str, str]) -> None:
    runtime = Runtime.open(load_settings({**baton_env, "BATON_HITL_MAX_REQUIRED_APPROVALS": "2"}))
    try:
        broker = get_broker(runtime)
        with pytest.raises(ArgumentError, match="BATON_HITL_MAX_REQUIRED_APPROVALS"):
            await broker.create(NewRequest("approval", "Too many", timeout_seconds=60, required_approvals=3))
        assert broker.list_pending() == []
        question = await broker.create(NewRequest("input", "Q?", timeout_seconds=60, required_approvals=3))
        assert question["required_approvals"] == 1  # a quorum is for approvals
    finally:
        runtime.close()


async def test_racing_approvers_of_a_quorum_produce_one_final_outcome(
    baton_env: dict[str, str], database_url: str
) -> None:
    runtime = Runtime.open(load_settings({**baton_env, "BATON_DATABASE_URL": database_url}))
    try:
        await _race(get_broker(runtime))
    finally:
        runtime.close()


async def _race(broker: HitlBroker) -> None:
    view = await broker.create(NewRequest("approval", "Race", timeout_seconds=600, required_approvals=2))
    outcomes: list[Any] = []

    def approve(name: str) -> None:
        try:
            outcomes.append(broker.respond(view["request_id"], Decision(True, via="cli", decided_by=name)))
        except BatonError as exc:
            outcomes.append(exc.error_class)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            for name in ("ana", "ben", "cy", "di"):
                group.start_soon(anyio.to_thread.run_sync, approve, name)
    final = broker.get(view["request_id"])
    assert final["status"] == "approved" and len(final["decided_by"].split(", ")) == 2
    refused = [o for o in outcomes if isinstance(o, str)]
    assert sorted(refused) == ["hitl_request_already_decided"] * 2
    assert len(broker.runtime.receipts.list(kind="hitl_decided")) == 1


async def test_a_step_up_request_takes_only_a_proof_bound_to_it_from_its_person(broker: HitlBroker) -> None:
    view = await broker.create(NewRequest("approval", "Pay", {"to": "x"}, 600, step_up=True))
    request_id, digest = view["request_id"], view["arguments_sha256"]
    wrong = [
        Decision(True, via="cli", decided_by="ana"),
        Decision(True, via="admin_token"),
        Decision(True, via="passkey", decided_by="ana"),
        Decision(
            True, via="passkey", decided_by="ana", step_up=StepUpProof("hr_other", digest, "ana", "pk-1")
        ),
        Decision(
            True, via="passkey", decided_by="ana", step_up=StepUpProof(request_id, "0" * 64, "ana", "pk-2")
        ),
        Decision(
            True, via="passkey", decided_by="ana", step_up=StepUpProof(request_id, digest, "ben", "pk-3")
        ),
    ]
    for decision in wrong:
        with pytest.raises(HitlError) as refused:
            broker.respond(request_id, decision)
        assert refused.value.error_class == "hitl_step_up_required"
    assert broker.get(request_id)["status"] == "pending"
    proof = StepUpProof(request_id, digest, "ana", "pk-4")
    done = broker.respond(request_id, Decision(True, via="passkey", decided_by="ana", step_up=proof))
    assert (done["status"], done["decided_by"]) == ("approved", "ana")
    assert broker.link_spent("pk-4")  # the ceremony's nonce is spent with the decision

    rejected = await broker.create(NewRequest("approval", "Pay more", {"to": "y"}, 600, step_up=True))
    no = broker.respond(rejected["request_id"], Decision(False, via="cli", decided_by="ana"))
    assert no["status"] == "rejected"  # rejecting needs no step-up


async def test_every_approval_needs_step_up_when_the_operator_says_so(baton_env: dict[str, str]) -> None:
    runtime = Runtime.open(load_settings({**baton_env, "BATON_HITL_STEP_UP": "1"}))
    try:
        view = await get_broker(runtime).create(NewRequest("approval", "Any", timeout_seconds=60))
        assert view["step_up"] is True
    finally:
        runtime.close()


def test_an_agents_registered_owner_is_named_for_exclusion(runtime: Runtime) -> None:
    people = People(runtime)
    people.add("olga", ["build-bot"])
    people.add("pat")
    assert owner_excluded(runtime, "build-bot", "olga") is True
    assert owner_excluded(runtime, "build-bot", "pat") is False
    assert owner_excluded(runtime, "other-bot", "olga") is False


def test_without_people_or_an_admin_token_inbox_login_is_off_and_says_why(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Any
) -> None:
    agent = "people-agent-token-0123456789abcdef"
    server = http_server_factory({**baton_env, "BATON_HTTP_TOKEN": agent})
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        page = client.get("/inbox/login")
        assert 'id="login-off"' in page.text and "passkey-login" not in page.text
        bearer = {"Authorization": f"Bearer {agent}"}
        assert client.get("/inbox", headers=bearer).status_code == 303  # to the login page
        assert client.post("/inbox/login", data={"token": agent}).status_code == 401
        refused = client.post("/inbox/requests/hr_x/decide", data={"action": "approve"}, headers=bearer)
        assert refused.status_code == 401 and "hitl_unauthorized" in refused.text
    log = next(tmp_path.glob("http-*.log")).read_text()
    assert "nobody has enrolled a passkey" in log and "BATON_HTTP_TOKEN never opens them" in log


def test_gateway_policies_set_quorum_and_step_up_per_tool_and_per_risk() -> None:
    from baton.gateway.policy.policy_files import parse_policy
    from baton.gateway.serving.call_approval import needs_step_up
    from tests.gateway.test_policy import error_class_of, valid_document

    document = valid_document()
    document["tools"] = {
        "allowed": ["read", "pay"],
        "denied": ["write"],
        "approval_required": ["read", "pay"],
        "required_approvals": {"pay": 2},
        "step_up": ["pay"],
    }
    policy = parse_policy(document)
    assert policy.tools.required_approvals == {"pay": 2}
    assert needs_step_up(None, policy, "pay") is True
    assert needs_step_up(None, policy, "read") is False
    assert needs_step_up("high", policy, "read") is True  # the adapter's risk_class is high
    assert needs_step_up("medium, low", policy, "read") is False
    document["tools"]["required_approvals"] = {"write": 2}
    assert error_class_of(document) == "adapter_policy_invalid"


def test_an_enrollment_link_query_is_all_the_page_needs(runtime: Runtime) -> None:
    people = People(runtime)
    people.add("dee")
    link = people.enrollment_link("dee", "http://localhost:7/")
    assert link.startswith("http://localhost:7/inbox/enroll?")
    params = _params(link)
    assert set(params) == {"p", "e", "n", "s"} and int(params["e"]) > time.time()
    assert urlencode(params) in link
