"""The subagent lifecycle: spawn (sync or async), message, cancel, and the tasks running their turns.

The runner owns the in-process side (the tasks, the sync waits, the spawns it knows) and delegates the rest:
a spawn's checks, context, stored row and answer to :mod:`~baton.subagents.spawning`, a follow-up message's
checks, stored turn and answer to :mod:`~baton.subagents.messaging`, a turn's model work, answer and failed
or cancelled end to :mod:`~baton.subagents.turns`, the read side to :mod:`~baton.subagents.queries`, the
budget and usage to :mod:`~baton.subagents.spend`, the store side of a cancel to
:mod:`~baton.subagents.cancellation`, and orphans and leases to :mod:`~baton.subagents.recovery`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from baton.boundary.toolkit import ToolRegistry
from baton.errors import BatonError, SubagentError
from baton.models.client import ChatTurn, ModelClient, ModelReply
from baton.runtime import Runtime
from baton.store.leases import RENEW_SECONDS, owner_is_gone
from baton.store.recent import RecentMap
from baton.store.rows import ListPage
from baton.subagents import cancellation, messaging, queries, recovery, spawning, table, turns
from baton.subagents.context import PrivacyFilter
from baton.subagents.governed import GovernedLoop
from baton.subagents.remembered import Remembered
from baton.subagents.spawning import SpawnRequest

#: SpawnRequest lives with the spawn's steps; callers import it from here, with the runner that takes it.
__all__ = ["CANCEL_POLL_SECONDS", "SpawnRequest", "SubagentRunner"]

#: How long the warm-up waits for the transport's start-up answers before starting anyway.
WARM_UP_AT_THE_LATEST_SECONDS = 0.5

#: How often a server checks for cancels made by another process (the CLI).
CANCEL_POLL_SECONDS = 1.0

#: How many subagents' acting agent and spawn receipt a server keeps in memory for their governed turns
#: (the most recently spawned or messaged); an older one's are read from the store when needed.
REMEMBERED_SUBAGENTS = 10_000


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
        #: The agent each recent subagent acts for (who spawned it, or sent it the last message), where its
        #: stored row names none (an operator's spawn).
        self._parents: RecentMap[str, str] = RecentMap(REMEMBERED_SUBAGENTS)
        #: seq and sha256 of the ``subagent_spawned`` receipt of each recent governed subagent this process
        #: spawned: every governed tool call links to it, and finding it in the chain is a scan of the spawn
        #: receipts (a subagent without tools makes no tool call, so none is kept for it).
        self._spawned: RecentMap[str, dict[str, Any]] = RecentMap(REMEMBERED_SUBAGENTS)
        #: The values the privacy filter removed for each recent subagent (from its parent context, then its
        #: tool results): removed again from its later tool results and messages. Kept in memory only, never
        #: stored: a subagent resumed by another process starts from what its stored context still holds.
        self._remembered: RecentMap[str, Remembered] = RecentMap(REMEMBERED_SUBAGENTS)

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
        """Build the model stack (pydantic-ai, the provider's SDK and client, the governed agent, the price
        table) in worker threads as soon as the start-up's answers are written, so the first spawn finds it
        built instead of paying seconds of imports (docs/benchmarks.md, "first model call")."""
        try:
            self.models.config()
        except BatonError:
            return
        if self.registry is not None:  # a transport that never says so (HTTP): start a moment after start
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.registry.start_up_answered.wait(), WARM_UP_AT_THE_LATEST_SECONDS)
        await asyncio.to_thread(self.models.model)
        if self.governed is not None:
            await asyncio.to_thread(self.governed.agent)
        from baton.models.pricing import warm

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

        ``receipt_in`` (the spawning tool call's :attr:`~baton.boundary.toolkit.CallContext.receipt_in`): an async
        spawn, whose success is this transaction, appends the call's receipt in it."""
        checked = spawning.check_before_storing(self.runtime, self.models, self.registry, request)
        tools, tool_limit, narrowed = checked
        redact = self.runtime.redactor.text
        request, filtered = spawning.screened(spawning.within(request, narrowed), redact, self.privacy)
        subagent_id = f"sa_{uuid.uuid4().hex[:20]}"  # before the preparation, whose receipt names it
        context = await spawning.prepare_context(self.models, request, filtered, subagent_id, redact)
        delegation = narrowed.for_subagent(subagent_id)
        spawn = spawning.Spawn(subagent_id, request, context, tools, tool_limit, delegation)
        spawned, stored = spawning.store(self.runtime, spawn, receipt_in)
        self._parents[subagent_id] = request.parent_agent
        self._remembered[subagent_id] = filtered.remembered()
        if tools:
            self._spawned[subagent_id] = {"seq": spawned.seq, "sha256": spawned.sha256}
        base = spawning.answer_base(spawn, spawned)
        task = self._start_task(subagent_id, self._run_first_turn(subagent_id, stored, spawn.request.task))
        if request.mode == "async":
            return spawning.started_answer(base, context.prep)
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

    async def _run_first_turn(self, subagent_id: str, stored: Any, task: str) -> ModelReply | None:
        """Run a spawn's first turn on its ``stored`` row and ``task`` (nothing when it was cancelled before
        its task ran: a cancel another process made then is receipted here, as this process owns the
        subagent)."""
        loaded = turns.first_turn(self.runtime, subagent_id, stored, task)
        if loaded is None:
            if subagent_id not in self._cancelling:
                cancellation.receipt_if_cancelled_elsewhere(self.runtime, subagent_id)
            return None
        return await self._run_turn(subagent_id, loaded)

    async def _run_turn(
        self, subagent_id: str, loaded: tuple[Any, list[ChatTurn]] | None = None
    ) -> ModelReply | None:
        """Run one turn of the stored conversation (``loaded``, else read now; see :func:`turns.run`)."""
        return await turns.run(
            self.runtime, self.models, subagent_id, loaded, self._governed_turn, self._cancelling
        )

    async def _governed_turn(self, row: Any, conversation: list[ChatTurn], system: str) -> ModelReply:
        """One turn as a pydantic-ai agent run over the spawn's tools (see :func:`turns.run_governed`)."""
        if self.governed is None:
            raise SubagentError(
                "subagent_tool_not_allowed", "This process serves no tools to give a subagent."
            )
        subagent_id = row.id
        links = turns.governed_links(
            self.runtime,
            subagent_id,
            # the subagent acts as the agent that spawned it (the stored one outlives this process)
            parent_agent=row.agent or self._parents.get(subagent_id, "agent"),
            spawn_receipt=turns.spawn_receipt(self.runtime, self._spawned, subagent_id),
            waiting=lambda request_id: self._set_waiting(subagent_id, request_id),
            delegation=row.delegation,
            remembered=self._remembered_of(subagent_id),
        )
        return await turns.run_governed(self.runtime, self.governed, row, conversation, system, links)

    def _remembered_of(self, subagent_id: str) -> Remembered:
        """What the filter removed for the subagent so far (kept from now on if this process had none)."""
        remembered = self._remembered.get(subagent_id)
        if remembered is None:
            remembered = self._remembered[subagent_id] = Remembered()
        return remembered

    def _set_waiting(self, subagent_id: str, request_id: str | None) -> None:
        """Record the human request a tool call of the subagent waits on (None: no longer waiting), and
        wake a sync wait on it."""
        turns.record_waiting(self.runtime, subagent_id, request_id)
        event = self._waiting.get(subagent_id)
        if request_id is not None and event is not None:
            event.set()

    # conversation ---------------------------------------------------------------------------------

    async def send_message(
        self, subagent_id: str, message: str, agent: str | None = None, parent_agent: str = "agent"
    ) -> dict[str, Any]:
        """Add a user turn to a finished conversation and return the subagent's answer (with the spawn's
        tools, if it has any; ``agent``: only that agent's subagent)."""
        remembered = self._remembered.get(subagent_id)
        if remembered is not None:
            message = remembered.scrub(message)  # nothing the filter removed for the spawn comes back
        messaging.add_user_turn(self.runtime, self.models, subagent_id, message, agent)
        self._parents[subagent_id] = parent_agent  # after the checks: a refused caller names no parent
        task = self._start_task(subagent_id, self._run_turn(subagent_id))
        if not await self._wait_sync(subagent_id, task):
            return messaging.waiting_answer(subagent_id, self.status(subagent_id))
        reply = None if task.cancelled() else task.result()
        return messaging.turn_answer(subagent_id, self.status(subagent_id), reply)

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
