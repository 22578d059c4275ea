"""The subagent lifecycle: spawn (sync or async), message, cancel, and the tasks running their turns.

The runner owns the in-process side (the tasks, the sync waits) and delegates the rest: a spawn's checks,
context, stored row and answer to :mod:`~baton.subagents.spawning`, the read side to
:mod:`~baton.subagents.queries`, the budget and usage to :mod:`~baton.subagents.spend`, the store side of a
cancel to :mod:`~baton.subagents.cancellation`, and orphans and leases to :mod:`~baton.subagents.recovery`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import select, update

from baton.errors import BatonError, SubagentError
from baton.leases import RENEW_SECONDS, owner_is_gone
from baton.models import ChatTurn, ModelClient, ModelReply
from baton.pydantic_ai_imports import aload_pydantic_ai
from baton.receipts import utc_now
from baton.rows import ListPage
from baton.runtime import Runtime
from baton.schema import receipts, subagents
from baton.subagents import cancellation, queries, recovery, spawning, table
from baton.subagents.context import PrivacyFilter, subagent_system_prompt
from baton.subagents.governed import GovernedLoop, TurnLinks
from baton.subagents.spawning import SpawnRequest
from baton.subagents.spend import check_subagent_budget, usage
from baton.subagents.states import ACTIVE, TERMINAL, Status
from baton.toolkit import ToolRegistry

#: SpawnRequest lives with the spawn's steps; callers import it from here, with the runner that takes it.
__all__ = ["CANCEL_POLL_SECONDS", "SpawnRequest", "SubagentRunner"]

log = logging.getLogger("baton.subagents")

#: How often a server checks for cancels made by another process (the CLI).
CANCEL_POLL_SECONDS = 1.0


class SubagentRunner:
    """Owns every subagent's state in the store and the tasks running their model calls."""

    def __init__(
        self, runtime: Runtime, models: ModelClient | None = None, registry: ToolRegistry | None = None
    ) -> None:
        self.runtime = runtime
        #: The server's tools, which a governed subagent's calls go through (None: no tools to give).
        self.registry = registry
        self.models = models or ModelClient(runtime.settings, runtime.receipts, runtime.redactor)
        self.privacy = PrivacyFilter.from_settings(
            runtime.settings.baton_private_keys, runtime.settings.sensitive_values()
        )
        #: The agent and tool lists every governed turn of this process runs on (None: no tools to give).
        self.governed = GovernedLoop(self.models, registry, self.privacy) if registry is not None else None
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        #: Set when a subagent's tool call starts waiting on a human request (what a sync spawn watches).
        self._waiting: dict[str, asyncio.Event] = {}
        #: Subagents whose cancel receipt waits for their local task to stop.
        self._cancelling: set[str] = set()
        self._parents: dict[str, str] = {}
        #: seq and sha256 of the ``subagent_spawned`` receipt of each subagent this process spawned: every
        #: governed tool call links to it, and finding it in the chain is a scan of the spawn receipts.
        self._spawned: dict[str, dict[str, Any]] = {}

    # lifecycle -----------------------------------------------------------------------------------

    def recover_orphans(self) -> int:
        """Fail the subagents whose owning process is gone (restart, crash, dead replica); returns how many."""
        return recovery.recover_orphans(self.runtime)

    def renew_leases(self) -> None:
        """Extend the lease of every subagent this process is running."""
        if not self._tasks:
            return
        recovery.renew_leases(self.runtime)

    async def warm_up(self) -> None:
        """Import the provider stack in a worker thread after start, so the first spawn does not pay for it."""
        try:
            self.models.config()
        except BatonError:
            return
        await asyncio.sleep(0.5)  # let the client's initialize and tools/list go first
        await asyncio.to_thread(self.models.model)
        from baton.pricing import warm

        await asyncio.to_thread(warm)

    async def maintain(self) -> None:
        """For the server's lifetime: renew leases, fail orphans, notice cancels made by other processes."""
        self.recover_orphans()
        ticks = 0
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            ticks += 1
            if ticks % int(RENEW_SECONDS / CANCEL_POLL_SECONDS) == 0:
                self.renew_leases()
                self.recover_orphans()
            self._cancel_externally_cancelled()

    def _cancel_externally_cancelled(self) -> None:
        """Cancel local tasks whose subagent another process marked cancelled."""
        if not self._tasks:
            return
        for subagent_id in cancellation.cancelled_among(self.runtime, list(self._tasks)):
            task = self._tasks.get(subagent_id)
            if task is not None and subagent_id not in self._cancelling:
                self._stop_then_receipt(subagent_id, task)

    # spawn ----------------------------------------------------------------------------------------

    async def spawn(
        self, request: SpawnRequest, receipt_in: Callable[[table.Transaction], None] | None = None
    ) -> dict[str, Any]:
        """Prepare the context, persist the subagent, then run its first turn now or in the background.

        ``receipt_in`` (the spawning tool call's :attr:`~baton.toolkit.CallContext.receipt_in`): an async
        spawn, whose success is this transaction, appends the call's receipt in it."""
        tools, tool_limit = spawning.check_before_storing(self.runtime, self.models, self.registry, request)
        redact = self.runtime.redactor.text
        request, filtered = spawning.screened(request, redact, self.privacy)
        subagent_id = f"sa_{uuid.uuid4().hex[:20]}"  # before the preparation, whose receipt names it
        context = await spawning.prepare_context(self.models, request, filtered, subagent_id, redact)
        spawn = spawning.Spawn(subagent_id, request, context, tools, tool_limit)
        spawned = spawning.store(self.runtime, spawn, receipt_in)
        self._parents[subagent_id] = request.parent_agent
        self._spawned[subagent_id] = {"seq": spawned.seq, "sha256": spawned.sha256}
        base = spawning.answer_base(spawn, spawned)
        task = self._start_task(subagent_id, self._run_first_turn(subagent_id))
        if request.mode == "async":
            return spawning.queued_answer(base, context.prep)
        done = await self._wait_sync(subagent_id, task)
        return spawning.sync_answer(base, self.status(subagent_id), done)

    async def _wait_sync(self, subagent_id: str, task: asyncio.Task[Any]) -> bool:
        """Wait for a sync turn; False when it waits on a human approval past the sync wait (it goes on).

        A cancel of the waiting call (``notifications/cancelled``) cancels the subagent and its work.
        """
        waiting = self._waiting.setdefault(subagent_id, asyncio.Event())
        watcher = asyncio.ensure_future(waiting.wait())
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                wait = self.runtime.settings.baton_subagent_approval_wait_seconds
                await asyncio.wait({task}, timeout=wait)
        except asyncio.CancelledError:
            if not task.done():
                with contextlib.suppress(SubagentError):
                    self.cancel(subagent_id)
                await asyncio.wait({task})
            raise
        finally:
            watcher.cancel()
            self._waiting.pop(subagent_id, None)
        return task.done()

    def _start_task(self, subagent_id: str, work: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, name=f"subagent-{subagent_id}")
        self._tasks[subagent_id] = task
        task.add_done_callback(lambda _t: self._tasks.pop(subagent_id, None))
        return task

    async def _run_first_turn(self, subagent_id: str) -> ModelReply | None:
        with self.runtime.store.write_prepared() as connection:  # started and read in one transaction
            started = table.start(connection, subagent_id, utc_now())
            row, turns = table.load(connection, subagent_id) if started else (None, [])
        return await self._run_turn(subagent_id, (row, turns)) if row is not None else None

    async def _run_turn(
        self, subagent_id: str, loaded: tuple[Any, list[ChatTurn]] | None = None
    ) -> ModelReply | None:
        """Send the stored conversation (``loaded``, else read now) to the model and record the answer;
        never raises."""
        row, turns = loaded or queries.load(self.runtime, subagent_id)
        system = subagent_system_prompt(row.role, row.prepared_context)
        answered: list[bool] = []  # the answer, once recorded (with the model call's receipt, or after it)

        def answer_in(connection: table.Transaction, reply: ModelReply, counted: bool) -> None:
            text = self.runtime.redactor.text(reply.text)  # an echoed credential is stored redacted
            if table.complete(connection, subagent_id, text, utc_now(), None if counted else reply):
                latency = reply.receipt["latency_seconds"]
                table.add_message(connection, subagent_id, len(turns), "assistant", text, latency)
                answered.append(True)
            else:
                answered.append(False)

        try:
            if row.tools:
                # a governed turn adds each model call to the totals as it is receipted
                reply = await self._governed_turn(row, turns, system)
            else:
                check_subagent_budget(row)
                # the answer commits with the call's receipt: one transaction, and no receipted answer
                # can be lost between the two
                reply = await self.models.complete(
                    system,
                    turns,
                    purpose="subagent_turn",
                    subagent_id=subagent_id,
                    answer_in=lambda connection, reply: answer_in(connection, reply, False),
                )
        except asyncio.CancelledError:
            self._finish(
                subagent_id,
                "cancelled",
                error="The subagent was cancelled.",
                error_class="subagent_cancelled",
            )
            raise
        except BatonError as exc:
            self._finish(subagent_id, "failed", error=exc.message, error_class=exc.error_class)
            return None
        except Exception:
            log.exception("subagent turn failed")
            self._finish(
                subagent_id, "failed", error="The subagent failed unexpectedly.", error_class="internal_error"
            )
            return None
        if not answered:
            with self.runtime.store.write_prepared() as connection:
                answer_in(connection, reply, True)
        changed = answered[0]
        if not changed and subagent_id not in self._cancelling:
            cancellation.receipt_if_cancelled_elsewhere(self.runtime, subagent_id)
        return reply if changed else None

    async def _governed_turn(self, row: Any, turns: list[ChatTurn], system: str) -> ModelReply:
        """One turn as a pydantic-ai agent run over the spawn's tools (see :mod:`baton.subagents.governed`)."""
        from baton.models import to_model_messages

        if self.governed is None:
            raise SubagentError(
                "subagent_tool_not_allowed", "This process serves no tools to give a subagent."
            )
        subagent_id = row.id

        def record_in(connection: table.Transaction, reply: ModelReply, _written: Any) -> None:
            table.add_spend(connection, subagent_id, reply)

        def before_model_call() -> None:
            with self.runtime.store.read_prepared() as connection:
                current = table.pre_call(connection, subagent_id)
            if current is None:
                raise queries.not_found(subagent_id)
            if current.status not in ACTIVE:
                raise SubagentError("subagent_cancelled", "The subagent was cancelled.")
            check_subagent_budget(current)

        links = TurnLinks(
            subagent_id=subagent_id,
            # the subagent acts as the agent that spawned it (the stored one outlives this process)
            parent_agent=row.agent or self._parents.get(subagent_id, "agent"),
            spawn_receipt=self._spawn_receipt(subagent_id),
            record_in=record_in,
            before_model_call=before_model_call,
            waiting=lambda request_id: self._set_waiting(subagent_id, request_id),
        )
        limit = int(row.tool_limit or self.runtime.settings.baton_subagent_tool_limit)
        await aload_pydantic_ai()  # before any pydantic-ai import here: the warm-up may be importing it
        history = to_model_messages(system, turns)
        return await self.governed.run_turn(list(row.tools), limit, history, links)

    def _spawn_receipt(self, subagent_id: str) -> dict[str, Any]:
        """seq and sha256 of the subagent's ``subagent_spawned`` receipt (kept at spawn; looked up in the
        chain for a subagent another process spawned)."""
        known = self._spawned.get(subagent_id)
        if known is not None:
            return dict(known)
        needle = f'%"subagent_id":"{subagent_id}"%'
        query = select(receipts.c.seq, receipts.c.sha256).where(
            receipts.c.kind == "subagent_spawned", receipts.c.payload.like(needle)
        )
        with self.runtime.store.read() as connection:
            row = connection.execute(query.limit(1)).first()
        if row is None:
            return {"seq": None, "sha256": None}
        found = self._spawned[subagent_id] = {"seq": row.seq, "sha256": row.sha256}
        return dict(found)

    def _set_waiting(self, subagent_id: str, request_id: str | None) -> None:
        """Record the human request a tool call of the subagent waits on (None: no longer waiting)."""
        with self.runtime.store.write() as connection:
            connection.execute(
                update(subagents).where(subagents.c.id == subagent_id).values(waiting_request_id=request_id)
            )
        event = self._waiting.get(subagent_id)
        if request_id is not None and event is not None:
            event.set()

    def _finish(self, subagent_id: str, status: Status, *, error: str, error_class: str) -> None:
        now = utc_now()
        with self.runtime.store.write() as connection:
            error = self.runtime.redactor.text(error)
            if table.end(connection, subagent_id, status, error=error, error_class=error_class, now=now):
                self.runtime.receipts.append_in(
                    connection, f"subagent_{status}", {"subagent_id": subagent_id, "error_class": error_class}
                )

    # conversation ---------------------------------------------------------------------------------

    async def send_message(
        self, subagent_id: str, message: str, agent: str | None = None, parent_agent: str = "agent"
    ) -> dict[str, Any]:
        """Add a user turn to a finished conversation and return the subagent's answer (with the spawn's
        tools, if it has any; ``agent``: only that agent's subagent)."""
        self._parents[subagent_id] = parent_agent
        now = utc_now()
        with self.runtime.store.write() as connection:
            row = connection.execute(select(subagents).where(subagents.c.id == subagent_id)).first()
            if row is None or queries.hidden(row, agent):
                raise queries.not_found(subagent_id)
            if row.status in ACTIVE:
                raise SubagentError(
                    "subagent_busy", "The subagent is still working on its current turn.", status=row.status
                )
            if row.status in TERMINAL:
                raise SubagentError(
                    "subagent_already_terminal", f"The subagent is {row.status}.", status=row.status
                )
            check_subagent_budget(row, subagent_id=subagent_id)
            self.models.daily.check()
            position = table.message_count(connection, subagent_id)
            table.add_message(connection, subagent_id, position, "user", self.runtime.redactor.text(message))
            connection.execute(
                update(subagents)
                .where(subagents.c.id == subagent_id)
                .values(status="running", updated_at=now, error=None, error_class=None)
            )
        task = self._start_task(subagent_id, self._run_turn(subagent_id))
        if not await self._wait_sync(subagent_id, task):
            state = self.status(subagent_id)
            return {
                "success": True,
                "subagent_id": subagent_id,
                "status": "waiting_for_approval",
                "request_id": state["waiting_request_id"],
                "turn": state["turns"],
            }
        reply = None if task.cancelled() else task.result()
        state = self.status(subagent_id)
        if state["status"] != "completed" or reply is None:
            return {
                "success": False,
                "subagent_id": subagent_id,
                "status": state["status"],
                "error": state["error"],
                "error_class": state["error_class"],
                "turn": state["turns"],
            }
        return {
            "success": True,
            "subagent_id": subagent_id,
            "response": state["result"],
            "turn": state["turns"],
            "status": "completed",
            "usage": usage(reply.input_tokens, reply.output_tokens),
            "cost_usd": reply.cost_usd,
            "subagent_usage": state["usage"],
            "subagent_cost_usd": state["cost_usd"],
        }

    # queries ---------------------------------------------------------------------------------------

    def status(self, subagent_id: str, agent: str | None = None) -> dict[str, Any]:
        """The subagent's state, result, turns, usage and timestamps (``agent``: only that agent's)."""
        return queries.status(self.runtime, subagent_id, agent)

    def history(self, subagent_id: str) -> list[dict[str, Any]]:
        """The whole conversation, oldest first."""
        return queries.history(self.runtime, subagent_id)

    def list(
        self,
        status: str | None = None,
        limit: int = 200,
        after: tuple[str, str] | None = None,
        agent: str | None = None,
    ) -> list[dict[str, Any]]:
        """Subagents, newest first, optionally of one status and one agent; ``after`` = (created_at, id) of
        the last one seen (a stored row that cannot be read is left out and logged)."""
        return self.page(status, limit, after, agent).rows

    def page(
        self,
        status: str | None = None,
        limit: int = 200,
        after: tuple[str, str] | None = None,
        agent: str | None = None,
    ) -> ListPage:
        """One page of :meth:`list`, with the rows skipped (``{subagent_id, reason}``) and the next position."""
        return queries.page(self.runtime, status, limit, after, agent)

    # cancel ----------------------------------------------------------------------------------------

    def cancel(self, subagent_id: str, agent: str | None = None) -> dict[str, Any]:
        """Mark the subagent cancelled and stop its work; the ``subagent_cancelled`` receipt comes after it.

        Here, the in-flight model call and tool call are cancelled and the receipt is written once the
        task has stopped; a subagent another live process runs is stopped, and receipted, by that
        process (it notices within a second). ``agent``: only that agent's subagent.
        """
        row = cancellation.mark_cancelled(self.runtime, subagent_id, agent)
        task = self._tasks.get(subagent_id)
        in_flight = task is not None and not task.done()
        if task is not None and in_flight:
            self._stop_then_receipt(subagent_id, task)
        elif row.owner == self.runtime.instance_id or owner_is_gone(
            row.owner, row.lease_expires_at, me=self.runtime.instance_id
        ):
            cancellation.cancel_receipt(self.runtime, subagent_id)
        return {
            "success": True,
            "subagent_id": subagent_id,
            "status": "cancelled",
            "previous_status": row.status,
            "cancelled_in_flight_call": in_flight,
        }

    async def cancel_and_wait(self, subagent_id: str, agent: str | None = None) -> dict[str, Any]:
        """:meth:`cancel`, returning once local work has stopped and the cancel receipt is written."""
        task = self._tasks.get(subagent_id)
        result = self.cancel(subagent_id, agent)
        if task is not None and not task.done():
            await asyncio.wait({task})
            await asyncio.sleep(0)  # the receipt callback runs right after the task's own callbacks
        return result

    def _stop_then_receipt(self, subagent_id: str, task: asyncio.Task[Any]) -> None:
        """Cancel a local task; its cancel receipt is appended when it has stopped (nothing runs after)."""
        self._cancelling.add(subagent_id)

        def receipt(_task: asyncio.Task[Any]) -> None:
            self._cancelling.discard(subagent_id)
            cancellation.cancel_receipt(self.runtime, subagent_id)

        task.add_done_callback(receipt)
        task.cancel()

    async def aclose(self) -> None:
        """Cancel every local task and close the provider's connections (server shutdown)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.models.aclose()
