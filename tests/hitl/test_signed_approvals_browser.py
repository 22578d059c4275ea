"""Approvals that carry their proof, end to end: a gateway call a Cedar policy gates behind two people, approved
by alice and bob with their passkeys in real headless Chromium (a CDP virtual authenticator each) against a
real ``baton serve --http``; the chain exported, then checked by a copy of ``chain_verify.py`` run from a
directory that holds nothing else (baton unimportable), and every edit an auditor must catch caught.

Each edit rewrites every later hash and drops the checkpoints (:mod:`tests.hitl.chain_tamper`), so the chain
agrees with itself and only the approvals' checks, or the policy replay, can catch it.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.cli_process import run_cli
from tests.conftest import call
from tests.hitl.chain_tamper import Rows, one, read_rows, standalone_verifier, tampered, verify_copy
from tests.hitl.helpers import goto, pending_requests
from tests.hitl.test_inbox_browser import CHROMIUM, CHROMIUM_ARGS
from tests.hitl.test_people_browser import (
    ADMIN_TOKEN,
    AGENT_TOKEN,
    _agent,
    _enroll_and_log_in,
    _enrollment_link,
    _local,
    _person,
)

pytestmark = [pytest.mark.anyio, pytest.mark.needs("chromium", "bwrap"), pytest.mark.timeout(1800)]

POLICY = """\
@id("queries")
permit(principal, action == Action::"query", resource);
@id("no-drop")
forbid(principal, action == Action::"query", resource)
  when { context.arguments.sql like "*DROP*" };
@id("two-people-transfer")
@approvals("2")
permit(principal, action == Action::"transfer", resource);
"""
TRANSFER = {"to": "acme", "amount": 250}


def _seed(env: dict[str, str]) -> None:
    """The ``pay`` adapter live, its Cedar policy pinned."""
    with NpmRegistryServer() as registry:
        runtime = Runtime.open(load_settings({**env, "BATON_NPM_REGISTRY": registry.url}))
        try:
            tools = [tool("query", sql="string"), tool("transfer", to="string", amount="integer")]
            make_live(
                runtime,
                document("pay", publish(registry), tools),
                allowed=["query", "transfer"],
                call_policy=POLICY,
            )
        finally:
            runtime.close()


async def _run(env: dict[str, str], server: Any, shots: Path) -> dict[str, Any]:
    """Two queries (one permitted, one forbidden) and a transfer alice and bob approve in Chromium."""
    from playwright.async_api import async_playwright

    base = _local(server.base_url)
    links = {name: _enrollment_link(env, base, name) for name in ("alice", "bob")}
    result: dict[str, Any] = {}
    async with _agent(server.base_url) as session, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        people = {name: await _person(browser) for name in links}
        for name, (_context, page) in people.items():
            if name == "bob":  # bob's key is ES256 (most platform passkeys); alice's is the default, EdDSA
                await _enroll_es256(page, links[name], base, name)
            else:
                await _enroll_and_log_in(page, links[name], base, name)
        assert (await call(session, "pay__query", {"sql": "SELECT 1"}))["success"] is True
        assert (await call(session, "pay__query", {"sql": "DROP TABLE t"}))["success"] is False

        async def transfer() -> None:
            result.update(await call(session, "pay__transfer", TRANSFER))

        async with anyio.create_task_group() as group:
            group.start_soon(transfer)
            request_id = (await pending_requests(session))[0]["request_id"]
            alice, bob = people["alice"][1], people["bob"][1]
            await goto(alice, f"{base}/inbox/requests/{request_id}")
            assert await alice.text_content("button.approve") == "Approve with passkey"  # no step-up asked
            await alice.screenshot(path=str(shots / "quorum-approve-with-passkey.png"), full_page=True)
            await alice.click("button.approve")  # the passkey ceremony runs, then the form posts
            await alice.wait_for_selector("#counted")
            await goto(bob, f"{base}/inbox/requests/{request_id}")
            await bob.click("button.approve")
            await bob.wait_for_selector("#status.approved")
        for context, _page in people.values():
            await context.close()
        await browser.close()
    return result


#: The browser side of a passkey that offers only ES256 (P-256), as most platform authenticators make.
ES256_ONLY = """() => {
  const form = document.querySelector("#enroll");
  const options = JSON.parse(form.dataset.options);
  options.pubKeyCredParams = [{ type: "public-key", alg: -7 }];
  form.dataset.options = JSON.stringify(options);
}"""


async def _enroll_es256(page: Any, link: str, base: str, name: str) -> None:
    """Enroll at ``link`` with an ES256 key (the page's options narrowed before the ceremony), log in."""
    await goto(page, link)
    await page.evaluate(ES256_ONLY)
    await page.click("#enroll button")
    await page.wait_for_selector("#title")
    assert await page.text_content("#title") == "Passkey registered"
    await goto(page, f"{base}/inbox/login")
    await page.click("#passkey-login button")
    await page.wait_for_selector("#me")


def _flip(text: str, at: int = -1) -> str:
    """Base64url ``text`` with one byte of what it encodes changed."""
    raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    raw[at] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


def _decided(rows: Rows) -> dict[str, Any]:
    return one(rows, "hitl_decided", decision="approved")


def _bob_assertion(rows: Rows) -> dict[str, Any]:
    assertion: dict[str, Any] = _decided(rows)["proofs"][1]["assertion"]
    return assertion


def _revoke_bob_first(rows: Rows) -> None:
    """A ``passkey_revoked`` of bob's passkey moved before the approvals."""
    at = next(i for i, r in enumerate(rows) if r["kind"] == "hitl_partial_approval")
    revoked = {
        "person": "bob",
        "credential_id_sha256": _bob_assertion(rows)["credential_id_sha256"],
        "at": rows[at]["at"],
    }
    rows.insert(at, {"kind": "passkey_revoked", "at": rows[at]["at"], "payload": revoked})


def _quorum(rows: Rows, required: int, *, requested_too: bool) -> None:
    _decided(rows)["required_approvals"] = required
    if requested_too:
        one(rows, "hitl_requested", required_approvals=2)["required_approvals"] = required


#: Each edit an auditor must catch, and what the verifier says of it.
EDITS: dict[str, tuple[Any, str]] = {
    "one byte of the arguments": (
        lambda rows: one(rows, "hitl_requested", required_approvals=2)["arguments"].update(amount=251),
        "the recorded arguments do not hash",
    ),
    "one byte of an assertion's signature": (
        lambda rows: _bob_assertion(rows).update(signature=_flip(_bob_assertion(rows)["signature"], 10)),
        "signature that does not verify",
    ),
    "one byte of an assertion's authenticator data": (
        lambda rows: _bob_assertion(rows).update(
            authenticator_data=_flip(_bob_assertion(rows)["authenticator_data"], 0)
        ),
        "another relying party",
    ),
    "one byte of the enrolled key": (
        lambda rows: one(rows, "passkey_registered", person="bob").update(
            public_key=_flip(one(rows, "passkey_registered", person="bob")["public_key"])
        ),
        "bob's assertion",
    ),
    "the decision's quorum count": (lambda rows: _quorum(rows, 1, requested_too=False), "quorum differs"),
    "the quorum count of request and decision": (
        lambda rows: _quorum(rows, 3, requested_too=True),
        "over another action",
    ),
    "another person's passkey": (
        lambda rows: _bob_assertion(rows).update(
            credential_id_sha256=_decided(rows)["proofs"][0]["assertion"]["credential_id_sha256"]
        ),
        "made with alice's passkey",
    ),
    "a passkey revoked before it approved": (_revoke_bob_first, "revoked at seq"),
}


def _export(env: dict[str, str], tmp_path: Path) -> Path:
    export = tmp_path / "export"
    done = run_cli(env, "receipts", "export", str(export))
    assert done.returncode == 0, done.stderr
    return export


def _check_the_export(env: dict[str, str], tmp_path: Path) -> None:
    """The export verifies on a copy with only public material; each edit is caught, signatures need cryptography."""
    export = _export(env, tmp_path)
    public = tmp_path / "trusted-checkpoint.pub"
    public.write_text((export / "checkpoint.pub").read_text())
    verifier = standalone_verifier(tmp_path)
    clean = verify_copy(verifier, export, public)
    assert clean.returncode == 0, clean.stderr
    assert (
        "3 passkey assertions checked" in clean.stdout and "signatures checked (cryptography)" in clean.stdout
    )
    stdlib = verify_copy(verifier, export, public, stdlib_only=True)
    assert stdlib.returncode == 0, stdlib.stderr
    assert "signatures not checked: cryptography missing" in stdlib.stdout  # bob's ES256 (alice's EdDSA is)
    for index, (name, (edit, says)) in enumerate(EDITS.items()):
        copy = tampered(export, tmp_path / f"tampered-{index}", edit)
        caught = verify_copy(verifier, copy, public)
        assert caught.returncode == 1, (name, caught.stdout)
        assert caught.stderr.startswith("receipt_approval_invalid: "), (name, caught.stderr)
        assert says in caught.stderr, (name, caught.stderr)
    unsigned = tampered(export, tmp_path / "unsigned", EDITS["one byte of an assertion's signature"][0])
    assert verify_copy(verifier, unsigned, public, stdlib_only=True).returncode == 0  # what it cannot check
    caught = verify_copy(
        verifier,
        tampered(export, tmp_path / "args", EDITS["one byte of the arguments"][0]),
        public,
        stdlib_only=True,
    )
    assert caught.returncode == 1 and "the recorded arguments do not hash" in caught.stderr


def _check_the_replay(env: dict[str, str], tmp_path: Path) -> None:
    """Replay agrees with every recorded verdict, names an edited one and a policy it cannot find."""
    agreed = run_cli(env, "receipts", "verify", "--replay")
    assert agreed.returncode == 0, agreed.stderr
    assert (
        "replay: 3 gateway calls re-derived their recorded verdict; 0 differ, 0 could not be replayed"
        in agreed.stdout
    )
    export = tmp_path / "export"
    rows = read_rows(export)
    forbidden = next(
        i for i, r in enumerate(rows) if r["kind"] == "gateway_call" and "DROP" in str(r["payload"])
    )

    def permit_the_drop(rows: Rows) -> None:
        rows[forbidden]["payload"]["call_policy_decision"] = {
            "effect": "permit",
            "approvals": 0,
            "reasons": ["queries"],
        }

    edited = tampered(export, tmp_path / "edited-verdict", permit_the_drop)
    public = str(tmp_path / "trusted-checkpoint.pub")
    named = run_cli(env, "receipts", "verify", str(edited), "--public-key", public, "--replay")
    assert named.returncode == 1
    assert (
        f"receipt_replay_mismatch: seq {forbidden + 1}: query: recorded permit, replay gives forbid"
        in named.stderr
    )
    pinned = rows[forbidden]["payload"]["call_policy_sha256"]
    (edited / "policies" / f"{pinned}.cedar").unlink()
    lost = run_cli(env, "receipts", "verify", str(edited), "--public-key", public, "--replay")
    assert lost.returncode == 1 and f"Cedar policy {pinned} is not in the archive" in lost.stderr


async def test_a_quorum_approved_with_passkeys_verifies_offline_and_every_edit_is_caught(
    baton_env: dict[str, str], http_server_factory: Any, tmp_path: Path
) -> None:
    env = {**baton_env, "BATON_HTTP_TOKEN": AGENT_TOKEN, "BATON_ADMIN_TOKEN": ADMIN_TOKEN}
    _seed(env)
    server = http_server_factory(env)
    result = await _run(env, server, tmp_path)
    assert result["success"] is True, result
    server.stop()  # its shutdown checkpoint anchors the chain
    revoked = run_cli(env, "people", "revoke-passkey", "bob", _bob_credential(env))
    assert revoked.returncode == 0, revoked.stderr  # revoked after approving: the approval still verifies
    _check_the_export(env, tmp_path)
    _check_the_replay(env, tmp_path)


def _bob_credential(env: dict[str, str]) -> str:
    """Bob's credential id, from ``baton people passkeys bob --json``."""
    import json

    listed = run_cli(env, "people", "passkeys", "bob", "--json")
    assert listed.returncode == 0, listed.stderr
    credential: str = json.loads(listed.stdout)[0]["credential_id"]
    return credential
