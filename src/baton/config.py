"""Settings from the environment (SPEC.md section 2), read once per process.

An empty string means unset, so a blanked variable (as the campaign runner
does to disable a channel) behaves exactly like a missing one.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from baton.errors import ConfigError

#: Environment variables whose values are credentials or private delivery identifiers.
SENSITIVE_ENV_NAMES: frozenset[str] = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "KIMI_API_KEY",
        "MOONSHOT_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "SENDGRID_API_KEY",
        "SMTP_PASSWORD",
        "SMTP_USERNAME",
        "SMTP_FROM_EMAIL",
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_DEFAULT_CHAT_ID",
        "SLACK_WEBHOOK_URL",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_CHANNEL_ID",
        "TELEGRAM_WEBHOOK_SECRET",
        "DISCORD_WEBHOOK_URL",
        "HITL_ADMIN_EMAIL",
        "HITL_WEBHOOK_URL",
        "HITL_WEBHOOK_SECRET",
        "BATON_HTTP_TOKEN",
        "BATON_ADMIN_TOKEN",
        "OTEL_EXPORTER_OTLP_HEADERS",
    }
)


#: A Slack workspace id (T…) or Enterprise Grid organization id (E…).
SLACK_TEAM = re.compile(r"^[TE][A-Z0-9]{2,30}$")
#: An agent's name (a registered HTTP agent's, or ``BATON_AGENT_NAME``), and the names baton gives callers
#: itself, which no agent may take (:mod:`baton.identity.agents` checks registrations against both).
AGENT_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RESERVED_AGENT_NAMES = frozenset({"operator", "local", "stdio-agent", "anonymous"})


def _blank(value: Any) -> bool:
    """None, an empty string or only whitespace: the variable counts as unset."""
    return value is None or (isinstance(value, str) and value.strip() == "")


class Settings(BaseModel):
    """Every setting baton reads; field names are the variables' names in lower case."""

    model_config = ConfigDict(extra="ignore", frozen=False)

    # model
    collab_provider: str | None = None
    openai_model: str | None = None
    openai_base_url: str | None = None
    moonshot_api_key: str | None = None
    kimi_api_key: str | None = None
    openai_api_key: str | None = None
    anthropic_api_key: str | None = None
    openrouter_api_key: str | None = None
    collab_llm_receipt_path: Path | None = None
    collab_model_timeout_seconds: float = 120.0
    collab_max_tokens: int = 2048
    baton_model_request_log: Path | None = None
    # cost budgets per UTC day, counted in the store (shared by replicas)
    baton_budget_daily_usd: float | None = None
    baton_budget_daily_tokens: int | None = None
    # governed subagents (docs/subagents.md): concurrent subagents, default tool-call limit, sync wait
    baton_subagent_max_concurrent: int | None = None
    baton_subagent_tool_limit: int = 20
    baton_subagent_approval_wait_seconds: float = 30.0
    # how deep subagents may nest (1: a subagent cannot spawn; docs/subagents.md, delegation)
    baton_subagent_max_depth: Annotated[int, Field(ge=1, le=10)] = 2
    # human in the loop
    hitl_timeout_seconds: int = 300
    hitl_admin_email: str | None = None
    hitl_webhook_url: str | None = None
    #: ``whsec_<base64>``: baton signs its own posts to HITL_WEBHOOK_URL with it (Standard Webhooks).
    hitl_webhook_secret: str | None = None
    baton_hitl_progress_seconds: float = 5.0
    baton_hitl_elicitation: bool = False
    baton_public_url: str | None = None
    baton_hitl_allow_mcp_decisions: bool = False
    baton_announce_on_terminal: bool = True
    # a request that reached nobody: fail the asking call at once (refuse) or wait anyway (docs/hitl.md)
    baton_hitl_unreached: Literal["refuse", "wait"] = "refuse"
    baton_admin_token: str | None = None
    # agents (docs/hitl.md, "Agents"): names and the per-agent cap on open requests
    baton_agent_name: str | None = None
    baton_http_agent_name: str = "http-agent"
    baton_hitl_max_pending_per_agent: PositiveInt = 100
    # people, quorum and step-up (docs/hitl.md)
    baton_hitl_max_required_approvals: Annotated[int, Field(ge=1, le=20)] = 3
    baton_hitl_step_up: bool = False
    baton_hitl_step_up_risk: str | None = None
    baton_hitl_exclude_owner: bool = False
    # escalation steps every request gets (docs/hitl.md, "Escalation and reminders")
    baton_hitl_escalation: str | None = None
    # OAuth 2.1 resource server on --http (docs/operations.md)
    baton_oauth_issuer: str | None = None
    baton_oauth_audience: str | None = None
    # notifications
    sendgrid_api_key: str | None = None
    smtp_host: str | None = None
    smtp_port: int | None = None
    smtp_username: str | None = None
    smtp_password: str | None = None
    smtp_from_email: str | None = None
    telegram_bot_token: str | None = None
    telegram_default_chat_id: str | None = None
    slack_webhook_url: str | None = None
    discord_webhook_url: str | None = None
    # deciding from chat (docs/notifications.md, "Deciding from chat"): Slack app, Telegram webhook
    slack_bot_token: str | None = None
    slack_channel_id: str | None = None
    slack_signing_secret: str | None = None
    #: The Slack workspaces (T…) or Enterprise Grid organizations (E…) whose presses may decide.
    slack_team_id: str | None = None
    telegram_webhook_secret: str | None = None
    # notifications: transport details and loopback overrides (docs/notifications.md)
    baton_smtp_security: str | None = None
    baton_telegram_api_url: str | None = None
    baton_slack_api_url: str | None = None
    baton_sendgrid_api_url: str | None = None
    baton_notify_timeout_seconds: float = 10.0
    baton_notify_attempts: int = 3
    baton_notify_backoff_seconds: float = 0.5
    baton_webhook_allow: str | None = None
    # receipts: signed checkpoints of the chain head (docs/receipts.md)
    baton_checkpoint_key_path: Path | None = None
    baton_checkpoint_path: Path | None = None
    baton_checkpoint_every_receipts: int = 1000
    baton_checkpoint_interval_seconds: float = 60.0
    # receipts: witnesses that cosign the checkpoints (docs/receipts.md)
    baton_witness_urls: str | None = None
    baton_witness_keys: str | None = None
    baton_witness_origin: str | None = None
    baton_witness_max_proof_lines: int = 100_000
    # other
    timer_storage_path: Path | None = None
    browser_headless: bool = True
    baton_home: Path | None = None
    # gateway: package registries for lock (unset: the public ones) and a verified download cache
    baton_npm_registry: str | None = None
    baton_pypi_url: str | None = None
    baton_artifact_cache: Path | None = None
    baton_database_url: str | None = None
    baton_http_token: str | None = None
    baton_private_keys: str | None = None
    baton_http_stateless: bool = False
    # the MCP conformance suite's reference tools, prompts and resources (docs/conformance.md); loopback only
    baton_conformance_fixtures: bool = False
    # the draft MCP Events extension: events/list, events/stream, events/poll (docs/events.md); off by default
    baton_experimental_events: bool = False
    # traces (the OpenTelemetry SDK reads these itself; listed so baton's docs and tests know them)
    otel_exporter_otlp_endpoint: str | None = None
    otel_exporter_otlp_traces_endpoint: str | None = None
    otel_exporter_otlp_headers: str | None = None
    otel_service_name: str | None = None
    # limits (docs/configuration.md, "Limits")
    baton_max_argument_bytes: PositiveInt = 256 * 1024
    baton_max_message_bytes: PositiveInt = 4 * 1024 * 1024
    baton_trusted_proxies: str | None = None
    baton_http_header_timeout_seconds: PositiveFloat = 10.0
    baton_http_body_timeout_seconds: PositiveFloat = 30.0
    baton_http_max_connections: PositiveInt = 512
    baton_http_max_connections_per_address: PositiveInt = 64
    baton_login_max_failures: NonNegativeInt = 5
    baton_login_lockout_max_seconds: PositiveFloat = 900.0
    baton_login_lockout_first_seconds: PositiveFloat = 1.0
    baton_timer_max_active: NonNegativeInt = 100  # per agent
    baton_timer_max_active_total: NonNegativeInt = 1000
    baton_timer_min_interval_seconds: Annotated[float, Field(ge=0.1)] = 0.1
    baton_timer_min_notify_interval_seconds: Annotated[float, Field(ge=0.1)] = 10.0
    baton_timer_min_spawn_interval_seconds: Annotated[float, Field(ge=0.1)] = 60.0
    baton_timer_spawns_per_hour: NonNegativeInt = 60

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, values: Any) -> Any:
        """An empty (or blank) value takes the field's default, exactly like a missing variable (one
        validator for the whole model: one per field made building the class a third slower, at every start)."""
        if not isinstance(values, dict):
            return values
        return {name: value for name, value in values.items() if not _blank(value)}

    @field_validator("baton_hitl_escalation")
    @classmethod
    def _escalation_steps(cls, value: str | None) -> str | None:
        """The operator's default steps must follow the steps' grammar (:mod:`baton.escalation_steps`)."""
        from baton.escalation_steps import StepSyntaxError, parse_steps

        try:
            parse_steps(value)
        except StepSyntaxError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("baton_agent_name")
    @classmethod
    def _stdio_agent_name(cls, value: str | None) -> str | None:
        """The stdio agent's name is an agent name and none of the names baton gives callers itself."""
        if value is not None and (
            not AGENT_NAME_PATTERN.fullmatch(value) or value.lower() in RESERVED_AGENT_NAMES
        ):
            raise ValueError(
                "an agent name is 1 to 64 letters, digits, '.', '_' or '-', starts with a letter or digit, "
                f"and is none of {', '.join(sorted(RESERVED_AGENT_NAMES))}"
            )
        return value

    @field_validator("slack_team_id")
    @classmethod
    def _slack_teams(cls, value: str | None) -> str | None:
        """A comma-separated list of workspace (T…) or organization (E…) ids, as Slack writes them."""
        if value is not None and not all(SLACK_TEAM.match(team.strip()) for team in value.split(",")):
            raise ValueError("a comma-separated list of Slack workspace ids (T…) or organization ids (E…)")
        return value

    @property
    def slack_teams(self) -> frozenset[str]:
        """The ids of SLACK_TEAM_ID (empty: a press from any workspace the app is installed in counts)."""
        return frozenset(team.strip() for team in (self.slack_team_id or "").split(",") if team.strip())

    @property
    def escalation_steps(self) -> tuple[Any, ...]:
        """The steps of BATON_HITL_ESCALATION (:class:`baton.escalation_steps.Step`), already validated."""
        from baton.escalation_steps import parse_steps

        return parse_steps(self.baton_hitl_escalation)

    @cached_property
    def home(self) -> Path:
        """The data directory (``BATON_HOME`` or the platform's user data dir), created 0700 on demand."""
        if self.baton_home is not None:
            path = self.baton_home
        else:
            from platformdirs import user_data_dir

            path = Path(user_data_dir("baton", appauthor=False))
        from baton.store.private import private_dir

        try:
            private_dir(path)
        except OSError as exc:
            reason = "is a file, not a directory" if path.exists() else (exc.strerror or "cannot be created")
            raise ConfigError(
                "config_invalid",
                f"BATON_HOME ({path}) {reason}: point it at a directory baton may create and write.",
                variables=["BATON_HOME"],
            ) from None
        if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(
                "config_invalid",
                f"BATON_HOME ({path}) is not a writable directory.",
                variables=["BATON_HOME"],
            )
        return path

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of the store."""
        return self.baton_database_url or f"sqlite:///{self.home / 'baton.db'}"

    def sensitive_values(self) -> tuple[str, ...]:
        """Every configured credential value, longest first, for redaction."""
        values = {
            str(value)
            for name in SENSITIVE_ENV_NAMES
            if (value := getattr(self, name.lower(), None)) not in (None, "")
        }
        return tuple(sorted(values, key=len, reverse=True))


#: Every environment variable baton reads (tests and benchmarks blank them for isolation).
ENVIRONMENT_VARIABLES: tuple[str, ...] = tuple(name.upper() for name in Settings.model_fields)

#: The variables that configure notification delivery (the campaign blanks them for a preflight run).
NOTIFICATION_VARIABLES: tuple[str, ...] = (
    "SENDGRID_API_KEY",
    "SMTP_HOST",
    "SMTP_PORT",
    "SMTP_USERNAME",
    "SMTP_PASSWORD",
    "SMTP_FROM_EMAIL",
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_DEFAULT_CHAT_ID",
    "SLACK_WEBHOOK_URL",
    "SLACK_BOT_TOKEN",
    "SLACK_CHANNEL_ID",
    "SLACK_SIGNING_SECRET",
    "TELEGRAM_WEBHOOK_SECRET",
    "DISCORD_WEBHOOK_URL",
    "HITL_ADMIN_EMAIL",
    "HITL_WEBHOOK_URL",
)


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Read settings from ``environ`` (default: the process environment)."""
    source = dict(os.environ if environ is None else environ)
    known = {name.upper() for name in Settings.model_fields}
    values = {name.lower(): value for name, value in source.items() if name.upper() in known}
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise settings_error(exc) from None


def settings_error(exc: ValidationError) -> ConfigError:
    """``config_invalid`` naming each bad variable and what it needs, never echoing its value."""
    problems = [
        {
            "variable": ".".join(str(part) for part in error["loc"]).upper() or "(settings)",
            "problem": error["msg"].removeprefix("Value error, ").rstrip("."),
        }
        for error in exc.errors(include_url=False, include_input=False)
    ]
    named = "; ".join(f"{p['variable']}: {p['problem']}" for p in problems)
    return ConfigError(
        "config_invalid",
        f"Invalid configuration: {named}.",
        variables=[p["variable"] for p in problems],
        problems=problems,
    )
