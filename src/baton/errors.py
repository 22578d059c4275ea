"""Errors with stable classes (SPEC.md section 5).

Every failure baton reports carries an ``error_class``: a stable snake_case
string that callers may branch on. The registry below is the single list of
those strings; ``docs/error-classes.md`` is checked against it by the tests.

    BatonError
    ├── ArgumentError        bad tool or CLI arguments
    │   └── ToolNameError    an unknown or over-long tool name (a JSON-RPC error, not a tool result)
    ├── ConfigError          missing or invalid configuration
    ├── StoreError           the state store
    ├── ReceiptError         the receipt chain and the credential guard
    ├── ProviderError        model providers
    │   └── BudgetError      a token or cost budget is spent
    ├── SubagentError        subagent lifecycle and context preparation
    ├── HitlError            human-in-the-loop requests
    ├── AgentError           named agents and their credentials
    ├── PeopleError          people who decide, and their passkeys
    ├── ChatError            decisions from Slack and Telegram callbacks, the Telegram webhook set-up
    ├── NotificationError    notification channels
    ├── TimerError           timers
    ├── GatewayError         governed external MCP servers
    └── CampaignError        the validation campaign
"""

from __future__ import annotations

from typing import Any

ERROR_CLASSES: dict[str, str] = {
    # arguments and internals
    "invalid_arguments": "A tool or command was called with arguments that do not match its schema.",
    "unknown_tool": "The tool name is not served by this server (a JSON-RPC error -32602, not a tool result).",
    "tool_name_too_long": "A tools/call named a tool longer than 128 characters (a JSON-RPC error -32602); nothing was stored or counted.",
    "argument_too_large": "A tool's arguments serialize to more than BATON_MAX_ARGUMENT_BYTES; the field is named.",
    "internal_error": "An unexpected failure inside baton; the message is redacted.",
    # configuration and store
    "config_invalid": "An environment variable or setting has a value baton cannot use.",
    "store_unavailable": "The state store could not be opened or written.",
    "http_bind_refused": "A non-loopback HTTP bind was asked for without BATON_HTTP_TOKEN.",
    "http_bind_failed": "`serve --http` or `console` could not listen: the port is in use or needs "
    "privileges, the address is not on this machine, or the host does not resolve.",
    "http_unauthorized": "An HTTP endpoint (/mcp, /metrics) was reached without a valid bearer token or OAuth access token.",
    "http_insufficient_scope": "The OAuth access token is valid but carries neither baton:agent nor baton:admin.",
    "http_body_too_large": "An HTTP request body is larger than the route allows (413); nothing past the limit was read.",
    "http_host_refused": "A request to a loopback bind named another Host or came from another Origin (DNS rebinding).",
    "http_rate_limited": "Too many failed authentications (inbox login, bearer token on /inbox, /mcp or /metrics) from this address; wait retry_after_seconds (429).",
    "http_request_timeout": "An HTTP request's headers or body did not arrive within BATON_HTTP_HEADER_TIMEOUT_SECONDS / BATON_HTTP_BODY_TIMEOUT_SECONDS (408).",
    "http_too_many_connections": (
        "The HTTP server already holds BATON_HTTP_MAX_CONNECTIONS connections, or "
        "BATON_HTTP_MAX_CONNECTIONS_PER_ADDRESS from this address (503); retry later."
    ),
    # receipts
    "receipt_chain_broken": "A receipt's hash or link to its predecessor does not verify.",
    "receipt_delegation_widens": "A subagent's receipt carries a delegation chain in which a link is not hashed, not linked to the one before, or holds more authority than it (tools, adapters, read_only, argument predicates, budgets, deadline).",
    "receipt_contains_secret": "A write was refused because it would still contain a credential.",
    "receipt_checkpoint_invalid": "A signed checkpoint of the receipt chain is malformed, its signature does not verify, or its key is not trusted.",
    "receipt_checkpoint_mismatch": "The receipt chain no longer holds a signed checkpoint's head at its seq: receipts were removed, rewound or rewritten (and the server will not sign it).",
    "receipt_approval_invalid": "A receipt's approval evidence does not verify: an assertion over another action, by another person's or a revoked key, a bad signature, arguments that do not hash to the signed digest, or a quorum short of its count.",
    "receipt_replay_mismatch": "Offline policy replay re-derived a gateway call's verdict from its pinned policies and it differs from the recorded one.",
    "receipt_replay_unavailable": "Offline policy replay could not judge a gateway call: a pinned policy hash is not in the archive, or the receipt holds no usable arguments.",
    "checkpoint_key_unavailable": "The checkpoint signing key (BATON_CHECKPOINT_KEY_PATH) could not be read or created.",
    "receipt_witness_rollback": "The receipt chain does not hold a head a pinned witness cosigned: receipts were rolled back, forked or withheld.",
    "receipt_witness_refused": "A witness refused to cosign a checkpoint (a rollback or fork of the chain it saw, or an untrusted signature), or its cosignature did not verify with the pinned key.",
    # model providers
    "provider_not_configured": "No model provider (or no key or model for it) is configured.",
    "provider_unknown": "COLLAB_PROVIDER names a provider baton does not support.",
    "provider_http_error": "The model provider answered with an HTTP error status.",
    "provider_timeout": "The model provider did not answer in time.",
    "provider_response_invalid": "The model provider's answer could not be parsed.",
    "provider_connection_failed": "The model provider could not be reached.",
    "budget_exceeded": "A token or cost budget (max_total_tokens / max_cost_usd of a spawn, BATON_BUDGET_DAILY_TOKENS / BATON_BUDGET_DAILY_USD of the server) is spent; the model was not called.",
    # subagents
    "subagent_not_found": "No subagent has that id.",
    "subagent_already_terminal": "The subagent already completed, failed or was cancelled.",
    "subagent_busy": "The subagent is still working on an earlier turn.",
    "subagent_cancelled": "The subagent was cancelled while the call ran.",
    "subagent_tool_not_allowed": "A spawn named tools that are neither a promoted adapter's allowed tool nor a documented subagent built-in, or that the spawning agent may not use; the names are listed.",
    "subagent_concurrency_exceeded": "BATON_SUBAGENT_MAX_CONCURRENT subagents are already queued or running; nothing was stored.",
    "subagent_tool_limit_reached": "The subagent made as many tool calls or model requests as its subagent_tool_limit allows.",
    "interrupted_by_restart": "The server stopped while the subagent was running.",
    "context_privacy_violation": "A value removed by the privacy filter reappeared in a prepared context.",
    "context_slice_invalid": "A minimal_slice path is malformed.",
    # human in the loop
    "hitl_timeout": "Nobody decided the request before it expired; nothing was approved.",
    "hitl_request_not_found": "No human-in-the-loop request has that id.",
    "hitl_request_already_decided": "The request was already decided; the first decision stands.",
    "hitl_request_expired": "The request expired before this decision arrived.",
    "hitl_response_invalid": "A decision was malformed (for example approved missing on an approval).",
    "hitl_link_invalid": "An inbox link is forged, expired, already used or bound to another request.",
    "hitl_unauthorized": "The inbox was reached without a valid bearer token or signed link.",
    "hitl_unreachable": "Nothing told anyone that the request waits (no progress, elicitation, task, card, channel, terminal or console); nothing is approved, and it says what to set up.",
    "hitl_still_pending": "The wait ended before anyone decided; the request is still pending (wait again by id).",
    "mcp_request_state_invalid": "A multi-round-trip retry carried a requestState that was already used or is malformed; call the tool again without it.",
    "hitl_csrf_invalid": "An inbox form was posted without its valid per-form token.",
    "hitl_step_up_required": "Approving this request needs a fresh passkey assertion bound to its id and arguments digest (step-up); none was given, or it did not verify.",
    "hitl_approval_duplicate": "This person already approved the request; a person counts once toward required_approvals.",
    "hitl_owner_excluded": "The agent's registered owner may not approve that agent's requests (BATON_HITL_EXCLUDE_OWNER=1).",
    "hitl_decider_not_authorized": "This MCP caller may not decide human-in-the-loop requests; a person decides (inbox, CLI, elicitation) unless BATON_HITL_ALLOW_MCP_DECISIONS=1 or the admin credential is used.",
    "approval_denied": "A human rejected the request.",
    "hitl_too_many_pending": "This agent already has BATON_HITL_MAX_PENDING_PER_AGENT open requests; wait for some to be decided or to expire.",
    # named agents
    "agent_name_invalid": "An agent name or role is malformed or reserved.",
    "agent_exists": "An active agent already has that name; revoke it first to issue a new token.",
    "agent_not_found": "No active agent has that name.",
    # notifications
    "notification_not_configured": "The channel lacks the configuration it needs; nothing was sent.",
    "notification_delivery_failed": "The channel was configured but delivery failed.",
    "notification_destination_refused": "A webhook URL given in the call is not a public internet address (loopback, private, link-local, ...) and BATON_WEBHOOK_ALLOW does not allow it; nothing was sent.",
    # timers
    "timer_not_found": "No timer has that id.",
    "timer_schedule_invalid": "The timer's schedule is missing, in the past, negative or ambiguous.",
    "timer_action_invalid": "The timer's action is unknown or malformed.",
    "timer_already_cancelled": "The timer was already cancelled.",
    "timer_limit_reached": "Too many active timers, or timer-started subagents over the spawn rate.",
    "timer_already_completed": "The one-shot timer already fired; there is nothing left to cancel.",
    # gateway: policy
    "adapter_not_found": "No adapter policy has that id.",
    "adapter_policy_invalid": "The adapter policy file is malformed or a field fails validation.",
    "adapter_policy_expired": "The adapter policy is past its expires_at.",
    "adapter_isolation_weakened": "The policy asks for weaker isolation than baton allows.",
    "adapter_tool_overlap": "A tool is both allowed and denied.",
    "adapter_tool_name_collision": "An adapter served unprefixed ([serving] unprefixed = true) would serve a tool name a built-in tool or another live adapter serves too; promotion refuses it, and a server that finds one serves neither name. Both are named.",
    "adapter_not_promoted": "The adapter is not live.",
    "adapter_blocked": "The adapter is blocked (see the reason in mcp_list_adapters).",
    "adapter_promotion_refused": "The adapter has no passing replay matching its current policy.",
    "adapter_busy": "Another lock, replay --apply, promote or demote of the same adapter is running; run the command again once it has finished.",
    "adapter_mount_invalid": "A host mount does not exist, is a symlink, a system tree, or BATON_HOME or a parent of it.",
    "adapter_env_unset": "The policy passes a variable by reference to a host variable that is not set for baton.",
    "artifact_no_entrypoint": "The locked package ships no runnable entrypoint (no bin or main file, no console script or __main__), or the file --entrypoint names is in no locked package; the entrypoints it ships are listed.",
    "mcp_tool_poisoning_suspected": "A replayed tool definition looks poisoned (hidden Unicode, model-aimed instructions, references to other tools, a shadowing name, an oversized description); promote needs each finding accepted by id.",
    "gateway_policy_forbidden": "The adapter's Cedar call policy forbids this call (explicitly, or no policy permits it: default deny).",
    "gateway_policy_error": "The adapter's Cedar call policy does not parse, is not the pinned one, failed on this call, or asks more approvals than BATON_HITL_MAX_REQUIRED_APPROVALS allows; the call is refused (fails closed).",
    "adapter_mount_not_writable": "A rw host mount is not writable by the user the sandbox writes as (host uid 65534 under root).",
    "adapter_capability_unforwardable": "The adapter needs a client feature baton cannot forward at run time (sampling, elicitation, tasks).",
    "adapter_policy_exists": "lock was given a package spec but a policy for that adapter id already exists.",
    "adapter_not_locked": "The adapter has no lock; run baton gateway lock first.",
    "adapter_not_verified": "The adapter's bundle has not passed the independent verifier.",
    "adapter_contract_unpinned": "The policy pins no contract yet; replay with --record-contract on a draft.",
    # gateway: artifacts
    "artifact_fetch_failed": "A pinned package could not be fetched from its registry.",
    "artifact_integrity_mismatch": "A fetched package does not match the registry's integrity value.",
    "artifact_tarball_checksum_mismatch": "A tarball's sha512 differs from the pin.",
    "artifact_archive_path_invalid": "An archive member is a link, absolute, escapes with .., or lies outside package/.",
    "artifact_archive_too_large": "An archive exceeds the file-count or unpacked-size limits.",
    "artifact_bundle_invalid": "The bundle manifest, SBOM or lock receipt is missing or does not verify.",
    "artifact_dependency_unresolvable": "A dependency has no matching version, or the policy does not pin it.",
    "artifact_dependency_conflict": "Two packages need versions of one dependency that a flat set cannot hold.",
    "artifact_receipt_chain_invalid": "The policy, lock receipt, verifier receipt and store do not link up.",
    "artifact_bundle_manifest_checksum_mismatch": "bundle-manifest.json differs from the hash in the lock receipt.",
    "artifact_bundle_sbom_checksum_mismatch": "The SBOM differs from the hash in the lock receipt.",
    "artifact_bundle_sbom_contract_invalid": "The SBOM is not CycloneDX 1.5 or does not list exactly the packages.",
    "artifact_bundle_package_set_mismatch": "The bundle's packages differ from the lock receipt or the policy.",
    "artifact_tarball_unreadable": "A tarball named by the bundle manifest cannot be read.",
    "artifact_tarball_invalid": "A tarball is not a readable gzipped tar.",
    "artifact_archive_root_invalid": "An archive member lies outside package/.",
    "artifact_archive_member_type_invalid": "An archive member is a symlink, hard link, device or other non-file.",
    "artifact_archive_limits_exceeded": "An archive exceeds the file-count or unpacked-size limits (a wheel's cap is lock --max-wheel-mb).",
    "artifact_archive_member_size_mismatch": "An archive member's content differs from its declared size.",
    "package_identity_mismatch": "An extracted package.json names another package or version.",
    "adapter_candidate_invalid": "A lock candidate is not npm:NAME[@VERSION|RANGE|TAG] or pypi:NAME[==VERSION].",
    "artifact_registry_error": "The registry answered with an error, or could not be reached, while resolving.",
    "artifact_metadata_invalid": "A registry document or the resolver's output is malformed or inconsistent.",
    "artifact_platform_unsupported": "A required (not optional) package does not install on this platform.",
    "artifact_install_script_refused": "A package declares an install script and the policy does not accept running without it.",
    "artifact_no_wheel_for_platform": "A PyPI package has no wheel for the sandbox interpreter and platform.",
    "artifact_resolver_unavailable": "The ecosystem's resolver (npm, uv) is not installed.",
    "artifact_install_failed": "The pinned wheels could not be installed with hashes required.",
    "adapter_runtime_drift": "The interpreter running the server differs from the one lock pinned, or a declared host program (`runtime.host_programs`) is unpinned, gone or differs from the one replay pinned.",
    "adapter_runtime_unavailable": "The interpreter the entrypoint names, or a declared host program being pinned, is not installed or does not run, or the node is one the package's `engines.node` refuses (`lock --node VERSION` bundles one).",
    "entrypoint_not_allowlisted": "The entrypoint is not an interpreter running a file of a pinned package.",
    "arguments_not_allowlisted": "An argument is too long, holds control characters or names a path outside the sandbox.",
    "adapter_destructive_tool_unapproved": "A destructive tool is allowed without approval_required and without an explicit exemption.",
    # gateway: sandbox and protocol
    "sandbox_unavailable": "The sandbox (bubblewrap or Docker) cannot run here.",
    "sandbox_limit_unenforceable": "The policy sets a limit this host's sandbox cannot enforce (cpu_limit without a cpu cgroup).",
    "mcp_protocol_response_timeout": "The external server did not answer in time.",
    "mcp_protocol_response_invalid": "The external server sent an oversized, non-JSON, mismatched or error response.",
    "mcp_server_exit_unclean": "The external server did not exit cleanly after stdin closed.",
    "mcp_tool_contract_mismatch": "The observed tool contract differs from the pinned one.",
    "mcp_adapter_tool_partition_mismatch": "The observed tool set is not exactly allowed ∪ denied.",
    "mcp_server_identity_mismatch": "The server name, version or protocol version differs from the pin.",
    "mcp_process_start_failed": "The sandboxed server process could not be started.",
    "mcp_protocol_write_failed": "Writing a request to the server's stdin failed (it exited early).",
    "mcp_initialize_contract_mismatch": "initialize answered with another protocol version, server name or version.",
    "mcp_tool_list_invalid": "tools/list did not return a list of tools.",
    "mcp_tool_schema_invalid": "A listed tool has no object inputSchema or malformed fields.",
    "mcp_tool_names_not_unique": "tools/list named one tool twice.",
    "mcp_tool_definition_mismatch": "Only titles, descriptions or output schemas drifted (possible tool poisoning).",
    "mcp_process_shutdown_timeout": "The server did not exit within the shutdown timeout after stdin closed.",
    "mcp_process_exit_invalid": "The server exited with a non-zero status after stdin closed.",
    "mcp_upstream_failed": "The upstream server crashed or failed during a proxied call.",
    "mcp_upstream_timeout": "A proxied call did not finish within its timeout.",
    "tool_denied": "The adapter's policy does not allow this tool.",
    "mcp_upstream_tool_error": "The upstream tool ran and reported an error (isError); its text is in error.",
    # campaign
    "campaign_config_incomplete": "The campaign was asked for something its configuration cannot provide.",
    "campaign_bundle_invalid": "A campaign bundle's manifest does not match its files.",
    # people and passkeys
    "person_not_found": "No person has that name.",
    "passkey_not_found": "That person has no passkey whose credential id starts with what `baton people revoke-passkey` was given.",
    "person_already_exists": "A person with that name already exists.",
    "enrollment_link_invalid": "A passkey enrollment link is forged, expired, already used or for a removed person.",
    "passkey_invalid": "A passkey registration or assertion did not verify (wrong origin, challenge, signature, counter or credential).",
    "chat_identity_invalid": "A chat identity is not `slack:USER_ID` (U… or W…) or `telegram:NUMERIC_USER_ID`.",
    "chat_identity_taken": "That chat identity is already linked to another person; unlink it first.",
    "chat_identity_not_found": "No person is linked to that chat identity.",
    "os_account_not_found": "No OS account has that name on this machine, or none is linked to a person (`baton people link-os`).",
    "os_account_taken": "That OS account is already linked to a person; unlink it first (`baton people unlink-os USER`).",
    # deciding from chat
    "chat_not_configured": "A chat callback route was reached while its secret (SLACK_SIGNING_SECRET, TELEGRAM_WEBHOOK_SECRET) is unset (404); nothing was decided.",
    "chat_signature_invalid": "A Slack callback's signature or a Telegram update's secret token does not verify (401); nothing was decided.",
    "chat_request_stale": "A Slack callback's timestamp is more than five minutes from the server's clock, as a replay's is (401); nothing was decided.",
    "chat_team_not_allowed": "A verified Slack press came from a workspace (or Enterprise Grid organization) that SLACK_TEAM_ID does not list (403); nothing was decided.",
    "chat_payload_invalid": "A verified chat callback is not a baton button press (400); nothing was decided.",
    "chat_webhook_not_configured": "baton chat telegram-webhook needs TELEGRAM_BOT_TOKEN and a TELEGRAM_WEBHOOK_SECRET of 1-256 of A-Z a-z 0-9 _ -; nothing was sent to Telegram.",
    "chat_webhook_url_invalid": "The Telegram webhook URL is missing (no --url, no BATON_PUBLIC_URL), not https:// with a host, or not baton's /chat/telegram/webhook route; nothing was sent.",
    "chat_api_failed": "Telegram's Bot API refused the call or was not reached (its description is shown, never the token).",
    # baton install
    "client_config_invalid": "The MCP client's config file is not a JSON object baton can merge into (left untouched).",
    "client_command_failed": "The client's own command (claude mcp add) is missing or failed.",
}


def error_classes_markdown() -> str:
    """``docs/error-classes.md``, generated from :data:`ERROR_CLASSES` (a test keeps them equal)."""
    lines = [
        "# Error classes",
        "",
        "Every failure result carries `success: false`, `error` (one human sentence) and `error_class`,",
        "one of the stable strings below. Generated from `baton.errors.ERROR_CLASSES` by",
        "`python -m baton.errors > docs/error-classes.md`.",
        "",
        "| error_class | meaning |",
        "| --- | --- |",
    ]
    lines += [f"| `{name}` | {meaning} |" for name, meaning in ERROR_CLASSES.items()]
    return "\n".join(lines) + "\n"


class BatonError(Exception):
    """A failure with a stable ``error_class`` and one human sentence."""

    def __init__(self, error_class: str, message: str, **details: Any) -> None:
        if error_class not in ERROR_CLASSES:
            raise ValueError(f"unregistered error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.details = details

    def to_result(self) -> dict[str, Any]:
        """The failure as a tool result: ``success``, ``error``, ``error_class`` and details."""
        return {**self.details, "success": False, "error": self.message, "error_class": self.error_class}


class ArgumentError(BatonError):
    """Arguments that do not match a tool's or command's schema."""


class ToolNameError(ArgumentError):
    """A ``tools/call`` names no tool this server serves, or a name over the cap: the spec's -32602."""


class ConfigError(BatonError):
    """Missing or invalid configuration."""


class StoreError(BatonError):
    """The state store failed."""


class ReceiptError(BatonError):
    """The receipt chain or the credential guard refused something."""


class ProviderError(BatonError):
    """A model provider is missing or failed."""


class BudgetError(ProviderError):
    """A budget is spent: the model call was refused before it was made."""


class SubagentError(BatonError):
    """A subagent operation failed."""


class HitlError(BatonError):
    """A human-in-the-loop operation failed."""


class AgentError(BatonError):
    """A named-agent operation failed."""


class PeopleError(BatonError):
    """People who decide, their enrollment links and passkeys."""


class ChatError(BatonError):
    """A Slack or Telegram callback was refused before anything was decided, or the Telegram webhook set-up failed."""


class NotificationError(BatonError):
    """A notification could not be sent."""


class TimerError(BatonError):
    """A timer operation failed."""


class GatewayError(BatonError):
    """Governance of an external MCP server failed closed."""


class CampaignError(BatonError):
    """The validation campaign could not run or verify."""


if __name__ == "__main__":
    print(error_classes_markdown(), end="")
