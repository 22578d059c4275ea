"""Readiness checks for ``baton doctor``: each answers ok/not ok with a reason, never a secret."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.errors import BatonError
from baton.ops.checks import Check
from baton.runtime import Runtime


def check_store(runtime: Runtime) -> Check:
    """The store opens and its receipt chain verifies, with its signed checkpoints."""
    from baton.evidence.anchor import verify_store

    report = verify_store(runtime)
    if report.ok:
        anchored = (
            f", anchored up to seq {report.anchored_seq}" if report.checkpoints else ", no checkpoint yet"
        )
        verdict = f"chain ok{anchored}"
    else:
        verdict = f"chain BROKEN: {report.error_class}"
    return Check("store", report.ok, f"{runtime.store.safe_url} ({report.count} receipts, {verdict})")


def check_provider(runtime: Runtime) -> Check:
    """A model provider is configured (no request is made)."""
    from baton.models.providers import resolve_provider

    try:
        config = resolve_provider(runtime.settings)
    except BatonError as exc:
        return Check("model provider", False, f"{exc.error_class}: {exc.message}")
    endpoint = f" at {config.base_url}" if config.base_url else ""
    return Check("model provider", True, f"{config.provider}, model {config.model}{endpoint}")


def check_sandbox(runtime: Runtime) -> Check:
    """bubblewrap can start a sandbox the way the gateway starts one (as host uid 65534)."""
    from baton.gateway.sandbox.sandbox import sandbox_report

    ok, detail = sandbox_report()
    return Check("sandbox", ok, detail)


def check_notifications(runtime: Runtime) -> list[Check]:
    """One line per notification channel: provider and endpoint host, or the missing variables."""
    from baton.notify.readiness import readiness

    lines = []
    for ready in readiness(runtime.settings):
        detail = ready.detail if ready.ready else f"{ready.detail}; missing {', '.join(ready.missing) or '-'}"
        lines.append(Check(f"notify: {ready.channel}", ready.ready, detail))
    return lines


def check_decision_authority(runtime: Runtime) -> Check:
    """Who may decide human-in-the-loop requests; ok means only a person (the safe default)."""
    settings = runtime.settings
    if settings.baton_hitl_allow_mcp_decisions:
        return Check(
            "hitl deciders",
            False,
            "BATON_HITL_ALLOW_MCP_DECISIONS=1: every MCP client of this server may decide (the agent too)",
        )
    detail = "a person (inbox, CLI, elicitation); MCP clients may not decide"
    if settings.baton_admin_token:
        detail += "; over HTTP, callers with BATON_ADMIN_TOKEN may"
    else:
        detail += "; inbox login is off (no BATON_ADMIN_TOKEN; an agent's token never opens it)"
    return Check("hitl deciders", True, detail)


def check_agents(runtime: Runtime) -> list[Check]:
    """Every agent by name and role, and each opt-in that widens what an agent may see or decide."""
    from baton.identity.agents import AgentDirectory

    settings = runtime.settings
    registered = [row for row in AgentDirectory(runtime.store).list() if row["active"]]
    names = [f"{row['name']} ({row['role']})" for row in registered]
    if settings.baton_http_token:
        names.append(f"{settings.baton_http_agent_name} (BATON_HTTP_TOKEN)")
    if settings.baton_oauth_issuer:
        names.append("oauth:<client id> (each OAuth client)")
    names.append(f"{settings.baton_agent_name or 'stdio:<clientInfo.name>'} (stdio)")
    if not registered and not settings.baton_http_token:
        names.append("local (loopback HTTP without a credential)")
    checks = [Check("agents", True, ", ".join(names))]
    observers = [row["name"] for row in registered if row["role"] == "observer"]
    if observers:
        checks.append(
            Check("agents: observers", False, f"{', '.join(observers)} see and read every agent's rows")
        )
    if settings.baton_hitl_elicitation:
        checks.append(
            Check(
                "hitl elicitation",
                False,
                "BATON_HITL_ELICITATION=true: an MCP client's form answer decides its own agent's requests "
                "(the client's word, not a person's proof; never for quorum or step-up requests)",
            )
        )
    return checks


def check_http(runtime: Runtime) -> Check:
    """The HTTP tokens pass the same checks ``serve --http`` makes: on loopback, and beyond it."""
    from baton.http.listening import check_http_bind

    settings = runtime.settings
    tokens = (settings.baton_http_token, settings.baton_admin_token)
    oauth = bool(settings.baton_oauth_issuer)
    try:
        check_http_bind("127.0.0.1", *tokens, oauth=oauth)
    except BatonError as exc:
        return Check("http", False, f"serve --http refuses to start: {exc.error_class}: {exc.message}")
    try:
        check_http_bind("0.0.0.0", *tokens, oauth=oauth)  # noqa: S104 (what an off-loopback bind would face)
    except BatonError as exc:
        return Check("http", True, f"loopback only; beyond it: {exc.message}")
    return Check("http", True, "serve --http may listen beyond loopback (tokens set and strong)")


def check_people(runtime: Runtime) -> Check:
    """Each person who decides (passkeys, owned agents), how the inbox logs in, quorum and step-up opt-ins."""
    from baton.identity.people import People

    settings = runtime.settings
    named = []
    for person in People(runtime).all():
        facts = [f"{person.passkeys} passkey{'s' if person.passkeys != 1 else ''}"]
        if person.enrollment_open:
            facts.append("enrollment link open")
        if person.owns:
            facts.append("owns " + ", ".join(person.owns))
        named.append(f"{person.name} ({'; '.join(facts)})")
    login = [
        *(["passkey"] if any(p.passkeys for p in People(runtime).all()) else []),
        *(["BATON_ADMIN_TOKEN (operator)"] if settings.baton_admin_token else []),
    ]
    detail = "people: " + (", ".join(named) if named else "nobody (`baton people add NAME`)")
    detail += "; inbox login: " + (" and ".join(login) if login else "off")
    opt_ins = []
    if settings.baton_hitl_step_up:
        opt_ins.append("BATON_HITL_STEP_UP=1 (every approval needs a passkey step-up)")
    if settings.baton_hitl_step_up_risk:
        opt_ins.append(f"BATON_HITL_STEP_UP_RISK={settings.baton_hitl_step_up_risk}")
    if settings.baton_hitl_exclude_owner:
        opt_ins.append("BATON_HITL_EXCLUDE_OWNER=1")
    opt_ins.append(f"at most {settings.baton_hitl_max_required_approvals} approvals per request")
    return Check("hitl people", bool(login), detail + "; " + "; ".join(opt_ins))


def check_chat(runtime: Runtime) -> Check:
    """Who may decide by pressing a button in Slack or Telegram: which routes are on, which accounts decide."""
    from baton.identity.chat_identities import ChatIdentities
    from baton.notify import slack_app, telegram_bot

    settings = runtime.settings
    routes = [
        *(["Slack buttons (/chat/slack/actions)"] if slack_app.buttons_enabled(settings) else []),
        *(["Telegram keyboard (/chat/telegram/webhook)"] if telegram_bot.buttons_enabled(settings) else []),
    ]
    linked: dict[str, list[str]] = {}
    for item in ChatIdentities(runtime).all():
        linked.setdefault(item.person, []).append(str(item.identity))
    accounts = "; ".join(f"{person} as {', '.join(ids)}" for person, ids in linked.items())
    detail = (
        ("on: " + ", ".join(routes)) if routes else "off (no SLACK_SIGNING_SECRET / TELEGRAM_WEBHOOK_SECRET)"
    )
    detail += "; decide as: " + (accounts or "nobody (`baton people link-chat NAME slack:U…`)")
    return Check("hitl chat", True, detail)


def check_escalation(runtime: Runtime) -> Check:
    """The operator's escalation steps (BATON_HITL_ESCALATION) and whether each target can be reached."""
    from baton.hitl.escalation import unreachable

    steps = runtime.settings.escalation_steps
    if not steps:
        return Check("hitl escalation", True, "no default steps (BATON_HITL_ESCALATION unset)")
    problems = unreachable(runtime, [step.target for step in steps])
    detail = ", ".join(step.text() for step in steps)
    if problems:
        detail += "; unreachable: " + ", ".join(f"{target} ({why})" for target, why in problems.items())
    return Check("hitl escalation", not problems, detail)


def check_conformance(runtime: Runtime) -> list[Check]:
    """Say so when the conformance suite's fixtures are on (a test profile, not a production one)."""
    if not runtime.settings.baton_conformance_fixtures:
        return []
    detail = "BATON_CONFORMANCE_FIXTURES is on: serve adds the conformance suite's test tools (loopback only)"
    return [Check("conformance fixtures", True, detail)]


def check_service(runtime: Runtime) -> list[Check]:
    """The daily budget, trace export and OAuth (running as a service)."""
    from baton.ops.service_checks import service_checks

    return service_checks(runtime)


#: Each subsystem may add its checks here (name -> function of the runtime).
CHECKS: list[Callable[[Runtime], Check | list[Check]]] = [
    check_store,
    check_provider,
    check_sandbox,
    check_notifications,
    check_decision_authority,
    check_agents,
    check_http,
    check_people,
    check_chat,
    check_escalation,
    check_conformance,
    check_service,
]


def run_checks(runtime: Runtime) -> list[Check]:
    """Every check, in order; a check that fails unexpectedly is reported, not raised."""
    results: list[Check] = []
    for check in CHECKS:
        try:
            outcome = check(runtime)
        except Exception as exc:
            outcome = Check(
                check.__name__.removeprefix("check_"), False, f"check failed: {type(exc).__name__}"
            )
        results.extend(outcome if isinstance(outcome, list) else [outcome])
    from baton.evidence.redaction import mask_url_passwords

    return [Check(c.name, c.ok, mask_url_passwords(runtime.redactor.text(c.detail))) for c in results]


def as_json(checks: list[Check]) -> list[dict[str, Any]]:
    """The checks as JSON rows."""
    return [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]
