"""Gates and status classification, as the reference campaign runner defines them."""

from __future__ import annotations

from typing import Any

DELIVERY_GATES = frozenset({"real_email_notification", "real_im_notification", "real_slack_notification"})


def classify_status(gates: dict[str, bool], *, interactive_human: bool) -> str:
    """``passed`` when every gate holds; ``blocked`` when only external gates fail; else ``failed``."""
    if all(gates.values()):
        return "passed"
    exempt = set(DELIVERY_GATES)
    if not interactive_human:
        exempt.add("real_human_decision")
    core = [value for name, value in gates.items() if name not in exempt]
    return "blocked" if all(core) else "failed"


def human_decision_accepted(decision: dict[str, Any] | None, result: dict[str, Any]) -> bool:
    """Whether the server accepted the live decision for the same request."""
    return bool(
        decision
        and result.get("success") is True
        and result.get("timeout") is not True
        and result.get("approved") is decision.get("approved")
        and result.get("request_id") == decision.get("request_id")
    )


def notification_readiness(env: dict[str, str]) -> dict[str, bool]:
    """Whether each real-delivery gate has the configuration it needs.

    Email uses baton's own readiness rule (SendGrid, SMTP_HOST, or a login at a mail provider apprise
    knows), so ``--real-notifications`` refuses to start exactly when the server could not send.
    """
    from baton.config import load_settings
    from baton.notify.mail import email_readiness

    email_service = email_readiness(load_settings(env)).ready
    return {
        "email": bool(email_service and env.get("HITL_ADMIN_EMAIL")),
        "telegram": bool(env.get("TELEGRAM_BOT_TOKEN") and env.get("TELEGRAM_DEFAULT_CHAT_ID")),
        "slack": bool(env.get("SLACK_WEBHOOK_URL")),
    }
