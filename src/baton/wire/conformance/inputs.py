"""The input-required fixtures: 2026-07-28 multi-round-trip (MRTR) tools, whose ``requestState`` baton's
own boundary seals and verifies (:func:`baton.hitl.mrtr.boundary`), and the 2025-11-25 back-channel
elicitations. Each asks the client as the user; none decides a human-in-the-loop request."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from baton.boundary.toolkit import CallContext
from baton.wire.conformance.media import REQUEST_SCOPED as _REQUEST_SCOPED
from baton.wire.conformance.media import ROOTS, answer_text, elicitation, plain, sampling, text

Handler = Callable[[dict[str, Any], CallContext], Awaitable[dict[str, Any]]]
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
NAME_FORM = elicitation("What is your name?", {"name": {"type": "string"}}, ["name"])
CONFIRM_FORM = elicitation("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])


def ask(requests: dict[str, Any], state: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ``InputRequiredResult`` (its state, when any, sealed by the boundary on the way out)."""
    interim: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        interim["requestState"] = json.dumps({**state, "nonce": secrets.token_hex(8)})
    return {"input_required": "form", "mcp_input_required": interim}


def done(line: str) -> dict[str, Any]:
    """The complete result."""
    return {"mcp_content": [text(line)]}


def answers(ctx: CallContext) -> dict[str, Any]:
    """The retry's ``inputResponses`` (none on a first round)."""
    return plain(ctx.input_responses)


def state(ctx: CallContext) -> dict[str, Any]:
    """The verified ``requestState`` of a retry, decoded (empty on a first round)."""
    try:
        decoded = json.loads(ctx.request_state or "{}")
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


async def elicit_name(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """One elicitation, then a greeting with the answer; a retry without it asks again."""
    if "user_name" in answers(ctx):
        return done(f"Hello, {answer_text(answers(ctx)['user_name'], 'name')}!")
    return ask({"user_name": NAME_FORM})


async def sample(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """One sampling request, then its text."""
    if "capital_question" in answers(ctx):
        content = (answers(ctx)["capital_question"] or {}).get("content") or {}
        return done(f"Sampling result: {content.get('text', 'no response')}")
    return ask({"capital_question": sampling("What is the capital of France?", 100)})


async def list_roots(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """One roots/list request, then how many roots came back."""
    if "client_roots" in answers(ctx):
        roots = (answers(ctx)["client_roots"] or {}).get("roots")
        return done(f"Found {len(roots) if isinstance(roots, list) else 0} root(s)")
    return ask({"client_roots": ROOTS})


async def request_state(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Completes only with the echoed (verified) state and the confirmation."""
    if state(ctx).get("kind") == "request-state" and "confirm" in answers(ctx):
        return done("state-ok: requestState validated")
    return ask({"confirm": CONFIRM_FORM}, {"kind": "request-state"})


async def multiple_inputs(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Three requests at once (elicitation, sampling, roots); completes when all three are answered."""
    wanted = {"user_name": NAME_FORM, "greeting": sampling("Generate a greeting", 50), "client_roots": ROOTS}
    got = answers(ctx)
    if state(ctx).get("kind") == "multiple-inputs" and wanted.keys() <= got.keys():
        greeting = (got["greeting"] or {}).get("content") or {}
        roots = (got["client_roots"] or {}).get("roots") or []
        name = answer_text(got["user_name"], "name")
        return done(f"Name: {name}; Greeting: {greeting.get('text', 'Hello there!')}; Roots: {len(roots)}")
    return ask(wanted, {"kind": "multiple-inputs"})


async def multi_round(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Two rounds: a name, then a colour, carried in the sealed state between them."""
    current, got = state(ctx), answers(ctx)
    if current.get("round") == 2 and "step2" in got:
        return done(
            f"Multi-round complete for {current.get('name')} who likes {answer_text(got['step2'], 'color')}"
        )
    if current.get("round") == 1 and "step1" in got:
        color = elicitation("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
        return ask({"step2": color}, {"round": 2, "name": answer_text(got["step1"], "name")})
    step1 = elicitation("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    return ask({"step1": step1}, {"round": 1})


async def tampered_state(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A tampered state never reaches here: the boundary refuses it (-32602)."""
    if state(ctx).get("kind") == "tamper-test" and "confirm" in answers(ctx):
        return done("integrity-ok: state verified")
    return ask({"confirm": CONFIRM_FORM}, {"kind": "tamper-test"})


async def capabilities(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Asks only by the methods the client declared on this request."""
    if answers(ctx):
        return done(f"capabilities-ok: received {','.join(sorted(answers(ctx)))}")
    declared = ctx.client_capabilities
    wanted: dict[str, Any] = {}
    if getattr(declared, "elicitation", None) is not None:
        wanted["user_input"] = elicitation("Please provide a value", {"value": {"type": "string"}}, ["value"])
    if getattr(declared, "sampling", None) is not None:
        wanted["sample_input"] = sampling("Sample request", 50)
    return (
        ask(wanted, {"kind": "capabilities-test"}) if wanted else done("No supported capabilities declared")
    )


async def _legacy_elicit(
    ctx: CallContext, message: str, schema: dict[str, Any], label: str
) -> dict[str, Any]:
    """2025-11-25: one form elicitation over the back-channel; the result echoes the answer."""
    try:
        answer = await ctx.session.elicit_form(message, schema, related_request_id=_REQUEST_SCOPED)
    except Exception as exc:  # the client cannot elicit: the result says so
        return done(f"Elicitation not supported or error: {type(exc).__name__}")
    return done(f"{label}: action={answer.action}, content={json.dumps(answer.content or {})}")


async def legacy_elicitation(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A one-field form with the caller's message."""
    schema = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
    return await _legacy_elicit(ctx, str(args.get("message", "")), schema, "User response")


async def legacy_defaults(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A form whose every field has a default (SEP-1034)."""
    from baton.wire.conformance.forms import DEFAULTS_FORM

    message = "Please review and update the form fields with defaults"
    return await _legacy_elicit(ctx, message, DEFAULTS_FORM, "Elicitation completed")


async def legacy_enums(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """A form of every enum shape (SEP-1330)."""
    from baton.wire.conformance.forms import ENUMS_FORM

    return await _legacy_elicit(
        ctx, "Please select options from the enum fields", ENUMS_FORM, "Elicitation completed"
    )


_MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
TOOLS: dict[str, tuple[str, dict[str, Any], Handler]] = {
    "test_input_required_result_elicitation": ("MRTR: asks for a name", _NO_ARGUMENTS, elicit_name),
    "test_input_required_result_sampling": ("MRTR: asks the client's model", _NO_ARGUMENTS, sample),
    "test_input_required_result_list_roots": ("MRTR: asks for the client's roots", _NO_ARGUMENTS, list_roots),
    "test_input_required_result_request_state": (
        "MRTR: needs its requestState back",
        _NO_ARGUMENTS,
        request_state,
    ),
    "test_input_required_result_multiple_inputs": (
        "MRTR: three requests at once",
        _NO_ARGUMENTS,
        multiple_inputs,
    ),
    "test_input_required_result_multi_round": ("MRTR: two rounds", _NO_ARGUMENTS, multi_round),
    "test_input_required_result_tampered_state": (
        "MRTR: sealed-state integrity",
        _NO_ARGUMENTS,
        tampered_state,
    ),
    "test_input_required_result_capabilities": (
        "MRTR: asks by declared capability",
        _NO_ARGUMENTS,
        capabilities,
    ),
    "test_elicitation": ("Tests server-initiated elicitation", _MESSAGE, legacy_elicitation),
    "test_elicitation_sep1034_defaults": (
        "Tests elicitation defaults (SEP-1034)",
        _NO_ARGUMENTS,
        legacy_defaults,
    ),
    "test_elicitation_sep1330_enums": ("Tests elicitation enums (SEP-1330)", _NO_ARGUMENTS, legacy_enums),
}
