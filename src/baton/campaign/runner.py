"""``baton campaign run``: start ``baton serve``, drive it through the official MCP stdio client, write the bundle."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape

from baton import __version__, terminal
from baton.campaign.bundle import BundleWriter
from baton.campaign.cases import CASES, run_cases
from baton.campaign.gates import (
    CANARY,
    classify_status,
    compute_gates,
    human_decision_accepted,
    notification_readiness,
)
from baton.campaign.human import parse_human_decision, read_decision_line
from baton.campaign.options import CampaignOptions, CaseRow
from baton.config import NOTIFICATION_VARIABLES, SENSITIVE_ENV_NAMES
from baton.errors import BatonError, CampaignError
from baton.evidence.receipts import CREDENTIAL_PATTERN
from baton.store.private import private_dir


class Campaign:
    """One run: its directory, its server environment and the rows it has recorded."""

    def __init__(self, options: CampaignOptions, console: Console | None = None) -> None:
        if options.interactive_human and options.human_timeout_seconds <= 0:
            raise CampaignError("campaign_config_incomplete", "--human-timeout-seconds must be positive.")
        self.options = options
        self.console = console or terminal.err
        self.readiness = notification_readiness(options.environ)
        if options.real_notifications and not all(self.readiness.values()):
            missing = ", ".join(name for name, ready in self.readiness.items() if not ready)
            raise CampaignError(
                "campaign_config_incomplete",
                f"--real-notifications needs every channel configured; missing: {missing}.",
            )
        self.run_dir = options.base_dir / options.campaign_id
        self.home = options.base_dir / f".{options.campaign_id}.home"
        self.env = self._server_env()
        self._preflight_provider()
        sensitive = tuple(v for name in SENSITIVE_ENV_NAMES if (v := self.env.get(name)))
        self.bundle = BundleWriter(self.run_dir, sensitive)
        self.rows: list[CaseRow] = []
        self.tool_names: set[str] = set()
        self.session: Any = None
        #: Why the governed-subagent case cannot run here (None: its adapter is live).
        self.governed_unavailable: str | None = None

    def _server_env(self) -> dict[str, str]:
        env = dict(self.options.environ)
        env.setdefault("COLLAB_PROVIDER", "moonshot")
        env.setdefault("OPENAI_MODEL", "kimi-k3")
        env.update(
            {
                "BATON_HOME": str(self.home),
                "COLLAB_LLM_RECEIPT_PATH": str(self.run_dir / "llm_receipts.checkpoint.json"),
                "BATON_MODEL_REQUEST_LOG": str(self.run_dir / "model_requests.jsonl"),
                "HITL_TIMEOUT_SECONDS": "2",
                "BROWSER_HEADLESS": "true",
                "TIMER_STORAGE_PATH": str(self.run_dir / "timers.json"),
                # the automated operator decides through mcp_respond_to_request (recorded in the summary)
                "BATON_HITL_ALLOW_MCP_DECISIONS": "1",
            }
        )
        env.pop("BATON_DATABASE_URL", None)
        if not self.options.real_notifications:
            env.update(dict.fromkeys(NOTIFICATION_VARIABLES, ""))
        return env

    def _preflight_provider(self) -> None:
        """Refuse to start anything when no model provider could answer (what ``baton doctor`` sees)."""
        from baton.config import load_settings
        from baton.models.providers import PROVIDERS, resolve_provider

        try:
            resolve_provider(load_settings(self.env))
        except BatonError as exc:
            if self.options.environ.get("COLLAB_PROVIDER"):
                raise CampaignError(
                    exc.error_class,
                    f"{exc.message} Nothing was started.\n"
                    "  Or run `baton campaign run --loopback-model` to check the wiring without a provider.",
                ) from None
            raise CampaignError(
                "provider_not_configured",
                "No model provider is configured; nothing was started.\n"
                f"  Set COLLAB_PROVIDER ({', '.join(PROVIDERS)}) and its key, e.g.\n"
                "  COLLAB_PROVIDER=moonshot MOONSHOT_API_KEY=... (OPENAI_MODEL optional; `baton doctor` checks),\n"
                "  or run `baton campaign run --loopback-model` to check the wiring without a provider.",
                missing=["COLLAB_PROVIDER", "MOONSHOT_API_KEY"],
            ) from None

    async def call(self, case: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool, record the row and print one progress line."""
        started = time.perf_counter()
        try:
            result = await self.session.call_tool(tool, arguments=arguments)
            payload = (
                result.structured_content
                if isinstance(result.structured_content, dict)
                else {"success": False, "error": "the tool returned no structured content"}
            )
            is_error = bool(result.is_error)
        except Exception as exc:
            payload, is_error = {"success": False, "error": f"{type(exc).__name__}: {exc}"}, True
        latency = round(time.perf_counter() - started, 3)
        row = CaseRow(case, tool, arguments, payload, is_error, latency)
        self.rows.append(row)
        self.bundle.write_json(
            f"receipts/{len(self.rows):02d}_{case}.json",
            {
                "case": case,
                "tool": tool,
                "arguments": arguments,
                "transport": "mcp-stdio",
                "mcp_result_is_error": is_error,
                "payload": payload,
                "latency_seconds": latency,
            },
        )
        ok = bool(payload.get("success"))
        status = "ok" if ok else str(payload.get("error_class") or "fail")
        colour = "green" if ok else "yellow"
        # pad the plain text, not the markup, so the columns stay put whatever the status
        self.console.print(
            f"  {len(self.rows):02d} {case:<32} [{colour}]{escape(status):<40}[/{colour}] {latency:>7.3f}s"
        )
        return payload

    async def run(self) -> Path:
        """Run every case and write the bundle; returns the campaign directory."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        self.run_dir.mkdir(parents=True, exist_ok=False, mode=0o700)
        private_dir(self.run_dir)  # 0700 whatever the umask: the bundle holds receipts and model outputs
        from baton.campaign.governed import prepare_adapter

        self.governed_unavailable = await anyio.to_thread.run_sync(prepare_adapter, self.home)
        self.bundle.write_json("protocol.json", self._protocol())
        self.console.print(f"[bold]baton campaign[/bold] {self.options.campaign_id} → {self.run_dir}")
        parameters = StdioServerParameters(
            command=self.options.server_command[0], args=self.options.server_command[1:], env=self.env
        )
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            self.session = session
            initialized = await session.initialize()
            listed = await session.list_tools()
            schemas = [
                tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools
            ]
            self.tool_names = {schema["name"] for schema in schemas}
            self.bundle.write_json(
                "catalog.json",
                {
                    "transport": "mcp-stdio",
                    "server_name": initialized.server_info.name,
                    "server_version": initialized.server_info.version,
                    "schemas": schemas,
                    "schema_sha256": _sha(json.dumps(schemas, sort_keys=True)),
                },
            )
            outcome = await run_cases(self)
        return self._finish(outcome)

    def _protocol(self) -> dict[str, Any]:
        return {
            "campaign_id": self.options.campaign_id,
            "baton_version": __version__,
            "transport": "mcp-stdio",
            "client": "mcp.ClientSession over mcp.client.stdio.stdio_client",
            "server_command": self.options.server_command,
            "cases": CASES,
            "interactive_human": self.options.interactive_human,
            "real_notifications": self.options.real_notifications,
            "privacy_canary": CANARY,
            "governed_adapter": "campaign (the stdlib test MCP server, locked and promoted in the run's store)"
            if self.governed_unavailable is None
            else f"not prepared: {self.governed_unavailable}",
        }

    def _finish(self, outcome: dict[str, Any]) -> Path:
        """Bundle the model receipts and the chain, judge the gates, write summary and manifest, print."""
        llm_receipts = self._write_llm_receipts()
        chain = self._write_chain()
        gates = compute_gates(self, outcome, llm_receipts, chain)
        status = classify_status(gates, interactive_human=self.options.interactive_human)
        header = {
            "campaign_id": self.options.campaign_id,
            "status": status,
            "official_complete": status == "passed",
        }
        self.bundle.write_json("summary.json", self._summary(header, outcome, gates, llm_receipts))
        self._guard_bundle()
        manifest = self.bundle.write_manifest(header)
        self.bundle.write_latest(header, manifest, Path.cwd())
        self._print_gates(gates, status)
        self._print_stopped(outcome.get("stopped"))
        return self.run_dir

    def _write_llm_receipts(self) -> list[dict[str, Any]]:
        """The model-call receipts the server checkpointed (none if it wrote no checkpoint), into the bundle."""
        llm_path = self.run_dir / "llm_receipts.checkpoint.json"
        llm_receipts: list[dict[str, Any]] = (
            json.loads(llm_path.read_text(encoding="utf-8")) if llm_path.is_file() else []
        )
        self.bundle.write_json("llm_receipts.json", llm_receipts)
        return llm_receipts

    def _write_chain(self) -> dict[str, Any]:
        """The store's receipt chain and signed checkpoints, into the bundle."""
        chain = _export_chain(self.home)
        self.bundle.write_json("receipts_chain.json", chain["receipts"])
        self.bundle.write_json("receipts_checkpoints.json", chain["checkpoints"])
        return chain

    def _summary(
        self,
        header: dict[str, Any],
        outcome: dict[str, Any],
        gates: dict[str, bool],
        llm_receipts: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """summary.json: the header, the gates and their blockers, counts, spend, and how the run was set up."""
        return {
            **header,
            "generated_at": datetime.now(UTC).isoformat(),
            "gates": gates,
            "blockers": [name for name, ok in gates.items() if not ok],
            "tool_call_count": len(self.rows),
            "model_call_count": len(llm_receipts),
            "model_spend": model_spend(llm_receipts),
            "interactive_human": self.options.interactive_human,
            "human_timeout_seconds": self.options.human_timeout_seconds
            if self.options.interactive_human
            else None,
            "publication_authorized": bool(
                outcome.get("human_decision")
                and human_decision_accepted(outcome["human_decision"], outcome["approval"])
                and outcome["human_decision"]["approved"]
            ),
            "real_notifications_enabled": self.options.real_notifications,
            "mcp_decisions_allowed": self.env.get("BATON_HITL_ALLOW_MCP_DECISIONS") == "1",
            "notification_readiness": self.readiness,
            "stopped": outcome.get("stopped"),
            "baton_version": __version__,
            "model": {
                "provider": self.env.get("COLLAB_PROVIDER"),
                "name": self.env.get("OPENAI_MODEL"),
                "source": self.options.model_source,
            },
        }

    def _print_stopped(self, stopped: dict[str, Any] | None) -> None:
        """Name the case that stopped the run, and its error, if one did."""
        if stopped:
            self.console.print(
                f"[red]stopped[/red] at {stopped['case']}: {stopped['error_class']}: {escape(stopped['error'])}"
            )

    def _guard_bundle(self) -> None:
        """No configured credential nor credential-shaped value in any file of the bundle."""
        for path in self.run_dir.rglob("*"):
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                if CREDENTIAL_PATTERN.search(text) or any(
                    len(s) >= 8 and s in text for s in self.bundle.sensitive_values
                ):
                    raise CampaignError("campaign_bundle_invalid", f"{path.name} holds a credential.")

    def _print_gates(self, gates: dict[str, bool], status: str) -> None:
        from rich.table import Table

        table = Table("gate", "holds", title=f"campaign {self.options.campaign_id}: {status}")
        if not self.console.is_terminal:  # a pipe gets plain, unboxed lines
            table.box = None
        for name, ok in gates.items():
            table.add_row(name, "[green]yes[/green]" if ok else "[red]no[/red]")
        self.console.print(table)

    async def human_decision(
        self, request_id: str, message: str, context: dict[str, Any], deadline: float
    ) -> dict[str, Any]:
        """Print ``HITL_REQUEST=…`` on stdout and read one live decision line from stdin."""
        presented_at = datetime.now(UTC).isoformat()
        print(
            "HITL_REQUEST="
            + json.dumps(
                {
                    "request_id": request_id,
                    "message": message,
                    "context": context,
                    "reply_format": "APPROVE[: notes] or REJECT[: notes]",
                },
                ensure_ascii=False,
            ),
            flush=True,
        )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CampaignError(
                "campaign_config_incomplete", "The live decision window closed before presentation."
            )
        try:
            line = await read_decision_line(sys.stdin, remaining)
        except TimeoutError:
            raise CampaignError("campaign_config_incomplete", "No live decision arrived in time.") from None
        if not line.strip():
            raise CampaignError("campaign_config_incomplete", "stdin closed before a live decision.")
        approved, notes = parse_human_decision(line)
        return {
            "request_id": request_id,
            "decision": "approved" if approved else "rejected",
            "approved": approved,
            "admin_notes": notes,
            "presented_at": presented_at,
            "responded_at": datetime.now(UTC).isoformat(),
            "timeout_seconds": self.options.human_timeout_seconds,
            "operator_channel": "live-user-stdin",
            "attestation": "A person typed this decision on the runner's stdin; the runner did not "
            "synthesize or default it.",
        }


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _export_chain(home: Path) -> dict[str, Any]:
    """The campaign store's receipts, its signed checkpoints and public key, and the chain verdict (read
    after the server stopped, so its shutdown checkpoint is there)."""
    from baton.config import Settings
    from baton.evidence.anchor import verify_store
    from baton.evidence.checkpoints import all_checkpoints, trusted_public_keys
    from baton.runtime import Runtime

    runtime = Runtime.open(Settings(baton_home=home))
    try:
        report = verify_store(runtime)
        rows = [r.model_dump() for r in runtime.receipts.list(limit=1_000_000)]
        keys = trusted_public_keys(runtime.settings)
        checkpoints = {
            "public_key": next(iter(keys.values())).hex() if keys else None,
            "key_id": next(iter(keys), None),
            "checkpoints": all_checkpoints(runtime),
        }
    finally:
        runtime.close()
    return {
        "receipts": rows,
        "checkpoints": checkpoints,
        "ok": report.ok,
        "count": report.count,
        "reason": report.reason,
    }


async def run_campaign(options: CampaignOptions, console: Console | None = None) -> Path:
    """Run one campaign to completion."""
    return await Campaign(options, console).run()


def run_campaign_sync(options: CampaignOptions) -> Path:
    """Blocking form for the CLI."""
    return anyio.run(run_campaign, options)


def model_spend(llm_receipts: list[dict[str, Any]]) -> dict[str, Any]:
    """The campaign's total tokens and cost over its model-call receipts (unpriced calls counted apart)."""
    tokens = sum(int((row.get("usage") or {}).get("total_tokens") or 0) for row in llm_receipts)
    priced = [row["cost_usd"] for row in llm_receipts if isinstance(row.get("cost_usd"), int | float)]
    return {
        "total_tokens": tokens,
        "cost_usd": round(sum(priced), 10) if priced or not llm_receipts else None,
        "unpriced_calls": len(llm_receipts) - len(priced),
        "price_sources": sorted(
            {str(row.get("price_source")) for row in llm_receipts if row.get("price_source")}
        ),
    }
