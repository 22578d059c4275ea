"""The store's tables: one SQLAlchemy ``MetaData`` that every subsystem adds to."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData()

receipts = Table(
    "receipts",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("kind", String(64), nullable=False, index=True),
    Column("at", String(40), nullable=False),
    Column("payload", Text, nullable=False),
    Column("prev_sha256", String(64), nullable=False),
    # not unique-indexed: the chain makes digests unique and nothing looks one up (migration 0018)
    Column("sha256", String(64), nullable=False),
)

#: One row (id=1) holding the chain's tip; locking it serializes appends on every database.
receipt_head = Table(
    "receipt_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
)

#: Signed checkpoints of the chain head (also appended to a file outside the database; docs/receipts.md).
receipt_checkpoints = Table(
    "receipt_checkpoints",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("seq", BigInteger, nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("at", String(40), nullable=False),
    Column("key_id", String(16), nullable=False),
    Column("signature", String(128), nullable=False),
)

subagents = Table(
    "subagents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("role", Text, nullable=False),
    Column("task", Text, nullable=False),
    Column("mode", String(8), nullable=False),
    Column("context_strategy", String(16), nullable=False),
    Column("prepared_context", Text, nullable=False),
    Column("filtered_fields", JSON, nullable=False),
    Column("prep_tokens", Integer, nullable=False, default=0),
    Column("status", String(16), nullable=False, index=True),
    Column("result", Text),
    Column("error", Text),
    Column("error_class", String(64)),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("owner", String(96)),
    Column("lease_expires_at", String(40)),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("started_at", String(40)),
    Column("finished_at", String(40)),
    # cost of every model call of the subagent (preparation + turns); unpriced calls are counted apart
    Column("cost_usd", Float, nullable=False, default=0.0, server_default="0"),
    Column("unpriced_calls", Integer, nullable=False, default=0, server_default="0"),
    Column("max_total_tokens", Integer),
    Column("max_cost_usd", Float),
    Column("agent", String(128), index=True),
    # governed subagents: the tools it may call (None: none), its tool-call limit, the request it waits on
    Column("tools", JSON),
    Column("tool_limit", Integer),
    # its delegation chain and argument predicates ({"chain": [...], "policies": {sha256: cedar}})
    Column("delegation", JSON),
    # what its own subagents (at any depth) spent: its budget covers what it delegated
    Column("delegated_tokens", Integer, nullable=False, default=0, server_default="0"),
    Column("delegated_cost_usd", Float, nullable=False, default=0.0, server_default="0"),
    Column("waiting_request_id", String(40)),
)

#: Model spend per UTC day (``YYYY-MM-DD``), shared by replicas: a daily budget check reads one row.
model_spend = Table(
    "model_spend",
    metadata,
    Column("day", String(10), primary_key=True),
    Column("calls", Integer, nullable=False, default=0),
    Column("input_tokens", BigInteger, nullable=False, default=0),
    Column("output_tokens", BigInteger, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("unpriced_calls", Integer, nullable=False, default=0),
    # what model calls in flight reserved of the day's budget (settled when each call is receipted)
    Column("reserved_tokens", BigInteger, nullable=False, default=0, server_default="0"),
    Column("reserved_usd", Float, nullable=False, default=0.0, server_default="0"),
)

subagent_messages = Table(
    "subagent_messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("subagent_id", String(40), ForeignKey("subagents.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("at", String(40), nullable=False),
    Column("latency_seconds", Float),
    Index("ix_subagent_messages_subagent_position", "subagent_id", "position", unique=True),
)

# timers ---------------------------------------------------------------------------------------------

#: One row per timer; ``next_fire_at`` (fixed-width UTC ISO 8601) is the claim token of the next firing.
timers = Table(
    "timers",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", Text, nullable=False),
    Column("schedule", String(8), nullable=False),
    Column("interval_seconds", Float),
    Column("action", JSON, nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("first_fire_at", String(40), nullable=False),
    Column("next_fire_at", String(40), index=True),
    Column("fire_count", Integer, nullable=False, default=0),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("cancelled_at", String(40)),
    Column("created_by", String(128)),
    Column("last_due_at", String(40)),
    Column("last_fired_at", String(40)),
    Column("last_fired_by", String(128)),
    Column("last_missed", Boolean),
    Column("last_outcome", String(16)),
    Column("last_error_class", String(64)),
    Column("agent", String(128), index=True),
    # the human-in-the-loop request whose escalation step this timer is (NULL: a timer an agent set)
    Column("request_id", String(40), index=True),
)

# human in the loop ---------------------------------------------------------------------------------

#: Approval and input requests; a decision is a conditional UPDATE ... WHERE status='pending'.
hitl_requests = Table(
    "hitl_requests",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("message", Text, nullable=False),
    Column("context", JSON),
    Column("options", JSON),
    Column("urgent", Boolean, nullable=False, default=False),
    Column("status", String(16), nullable=False, index=True),
    Column("created_at", String(40), nullable=False),
    Column("expires_at", String(40), nullable=False),
    Column("expires_epoch", Float, nullable=False),
    Column("approved", Boolean),
    Column("response", Text),
    Column("admin_notes", Text),
    Column("responded_at", String(40)),
    Column("decided_via", String(32)),
    Column("decided_by", String(512)),
    Column("required_approvals", Integer),
    Column("step_up", Boolean),
    Column("arguments_sha256", String(64)),
    Column("owner", String(128)),
    Column("waiter_instance", String(128)),
    Column("waiter_seen_epoch", Float),
    Column("waiter_gone", Boolean),
    Column("agent", String(128)),
    # who asked and what is at risk, written by the server (client, subagent, gateway adapter and tool)
    Column("provenance", JSON),
    # a decided request's notes, each with who wrote it: a quorum's approvers, then the decider
    Column("notes", JSON),
    # the paths that told someone it waits (baton.hitl.reach): url_elicitation, progress, chat, ...
    Column("reached_via", JSON),
    # the pending list's order (urgent first, soonest to expire, then id), and the expiry sweep
    Index(
        "ix_hitl_requests_pending_order",
        "status",
        text("urgent DESC"),
        "expires_epoch",
        "id",
    ),
    Index("ix_hitl_requests_status_expiry", "status", "expires_epoch"),
    # the per-agent cap
    Index("ix_hitl_requests_agent_status", "agent", "status"),
    # an agent's own pending list in the pending order
    Index(
        "ix_hitl_requests_agent_pending_order",
        "agent",
        "status",
        text("urgent DESC"),
        "expires_epoch",
        "id",
    ),
)

#: Signed inbox links that were spent (single use), by nonce.
hitl_link_uses = Table(
    "hitl_link_uses",
    metadata,
    Column("nonce", String(64), primary_key=True),
    Column("request_id", String(40), nullable=False),
    Column("used_at", String(40), nullable=False),
)

#: Inbox sessions ended by logout: a revoked session id is refused until its cookie would expire anyway.
hitl_session_revocations = Table(
    "hitl_session_revocations",
    metadata,
    Column("sid", String(64), primary_key=True),
    Column("expires_epoch", Float, nullable=False),
    Column("revoked_at", String(40), nullable=False),
)

#: Approvals of a request that needs more than one person: one row per person (a person counts once).
hitl_approvals = Table(
    "hitl_approvals",
    metadata,
    Column("request_id", String(40), primary_key=True),
    Column("person", String(128), primary_key=True),
    Column("via", String(32), nullable=False),
    Column("approved_at", String(40), nullable=False),
    # the OS account (real uid) behind a CLI approval: one uid counts once, whatever name it decides under
    Column("os_uid", Integer),
    Column("admin_notes", Text),
    # the WebAuthn assertion of a passkey approval (baton.identity.passkeys.StepUpProof.evidence)
    Column("assertion", JSON),
)

#: Standing approvals a person gave (baton.hitl.grants): an agent may call an adapter's tool under a Cedar
#: condition, ``max_uses`` times until ``expires_epoch``, unless revoked.
hitl_grants = Table(
    "hitl_grants",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("agent", String(128), nullable=False),
    Column("adapter_id", String(128), nullable=False),
    Column("tool", String(256), nullable=False),
    Column("condition", Text),
    Column("policy", Text, nullable=False),
    Column("policy_sha256", String(64), nullable=False),
    Column("max_uses", Integer, nullable=False),
    Column("uses", Integer, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("expires_at", String(40), nullable=False),
    Column("expires_epoch", Float, nullable=False),
    Column("granted_by", String(512), nullable=False),
    Column("granted_via", String(32), nullable=False),
    Column("request_id", String(40), nullable=False),
    Column("step_up", Boolean, nullable=False),
    Column("revoked_at", String(40)),
    Column("revoked_by", String(512)),
    Index("ix_hitl_grants_lookup", "agent", "adapter_id", "tool"),
)

# people: who may decide (docs/hitl.md, "People and passkeys") ---------------------------------------

#: A person who decides; ``enroll_nonce`` is the one open enrollment link (cleared when it is used).
people = Table(
    "people",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("created_at", String(40), nullable=False),
    Column("owns", JSON),
    Column("enroll_nonce", String(64)),
    Column("enroll_expires_epoch", Float),
    # where a ``person:NAME`` escalation step reaches them (email:… or telegram:…)
    Column("notify", Text),
)

#: A person's WebAuthn credentials (passkeys): the public key and the last sign count, never a secret.
people_passkeys = Table(
    "people_passkeys",
    metadata,
    Column("credential_id", String(1400), primary_key=True),
    Column("person", String(64), nullable=False, index=True),
    Column("public_key", Text, nullable=False),
    Column("sign_count", Integer, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("last_used_at", String(40)),
)

#: A person's chat accounts (docs/notifications.md, "Deciding from chat"): a Slack or Telegram user id maps
#: to exactly one person, whose name a button press in that chat decides under.
people_chat_identities = Table(
    "people_chat_identities",
    metadata,
    Column("platform", String(16), primary_key=True),
    Column("user_id", String(64), primary_key=True),
    Column("person", String(64), nullable=False, index=True),
    Column("linked_at", String(40), nullable=False),
)

#: OS accounts the operator mapped to a person (``baton people link-os NAME USER``): a CLI decision made from
#: that real uid counts as the person; an unmapped account decides only under its own name.
people_os_accounts = Table(
    "people_os_accounts",
    metadata,
    Column("os_uid", Integer, primary_key=True, autoincrement=False),
    Column("os_user", String(64), nullable=False),
    Column("person", String(64), nullable=False, index=True),
    Column("linked_at", String(40), nullable=False),
)

# gateway: governed external MCP servers (one row per adapter; the receipts hold the evidence)
gateway_adapters = Table(
    "gateway_adapters",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("state", String(16), nullable=False, index=True),
    Column("policy_path", Text, nullable=False),
    Column("policy_checksum", String(80)),
    Column("artifact_set_sha256", String(64)),
    Column("lock_receipt_sha256", String(64)),
    Column("verify_receipt_sha256", String(64)),
    Column("replay_receipt_sha256", String(64)),
    Column("contract", JSON),
    Column("block_reason", Text),
    Column("error_class", String(64)),
    Column("updated_at", String(40), nullable=False),
    # the snapshot a live adapter serves (gateway/serving.py); NULL checksum: not live
    Column("serving_policy_checksum", String(80)),
    Column("serving_replay_receipt_sha256", String(64)),
    Column("serving_contract", JSON),
    Column("serving_block_reason", Text),
    Column("serving_error_class", String(64)),
    Column("serving_since", String(40)),
)

# MCP tasks (extension io.modelcontextprotocol/tasks): durable, so any replica answers tasks/get
mcp_tasks = Table(
    "mcp_tasks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tool", String(200), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("status_message", Text),
    Column("request_id", String(40), index=True),
    Column("input_requests", JSON),
    Column("result", JSON),
    Column("error", JSON),
    Column("owner", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("last_updated_at", String(40), nullable=False),
    Column("expires_epoch", Float, nullable=False),
    Column("agent", String(128), index=True),
)

#: Named agents (``baton agents add``): each HTTP credential's sha256, never the token itself.
agents = Table(
    "agents",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("token_sha256", String(64), nullable=False, unique=True),
    Column("role", String(16), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("revoked_at", String(40)),
)
