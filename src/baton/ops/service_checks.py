"""``baton doctor`` lines for running as a service: the daily budget, trace export and OAuth."""

from __future__ import annotations

from baton.errors import BatonError
from baton.ops.checks import Check
from baton.runtime import Runtime


def service_checks(runtime: Runtime) -> list[Check]:
    """Budget, traces and OAuth readiness (no network request is made)."""
    return [_budget(runtime), _traces(), _oauth(runtime)]


def _budget(runtime: Runtime) -> Check:
    from baton.models.budgets import DailyBudget

    daily = DailyBudget(runtime.store, runtime.settings)
    spent = daily.spent()
    if not daily.enabled:
        return Check(
            "budget", True, f"no daily budget; today {spent.total_tokens} tokens, ${spent.cost_usd:.4f}"
        )
    limits = daily.limits
    parts = []
    if limits.max_total_tokens is not None:
        parts.append(f"{spent.total_tokens} of {limits.max_total_tokens} tokens")
    if limits.max_cost_usd is not None:
        parts.append(f"${spent.cost_usd:.4f} of ${limits.max_cost_usd:.4f}")
    try:
        daily.check()
    except BatonError:
        return Check("budget", False, f"spent today (UTC): {'; '.join(parts)}; model calls are refused")
    return Check("budget", True, f"today (UTC): {'; '.join(parts)}")


def _traces() -> Check:
    import importlib.util

    from baton.telemetry.tracing import endpoint_configured

    if not endpoint_configured():
        return Check("traces", True, "not exported (OTEL_EXPORTER_OTLP_ENDPOINT unset)")
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        return Check("traces", False, "OTEL_EXPORTER_OTLP_ENDPOINT is set but baton[otel] is not installed")
    return Check("traces", True, "exported over OTLP/HTTP")


def _oauth(runtime: Runtime) -> Check:
    from baton.http.oauth import check_settings, enabled

    if not enabled(runtime.settings):
        return Check("oauth", True, "off (static bearer tokens only)")
    try:
        issuer, audience = check_settings(runtime.settings)
    except BatonError as exc:
        return Check("oauth", False, f"{exc.error_class}: {exc.message}")
    return Check("oauth", True, f"JWTs from {issuer} for {audience} (baton:agent, baton:admin)")
