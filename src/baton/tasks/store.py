"""Durable task rows (``mcp_tasks``): created before ``CreateTaskResult`` is sent, read by any replica."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio

from baton import clock

if TYPE_CHECKING:
    from baton.runtime import Runtime

TERMINAL = ("completed", "failed", "cancelled")
TASK_TTL_SECONDS = 7 * 86_400
POLL_INTERVAL_MS = 1000


class Changed:
    """A level flag a listen stream waits on; set whenever this process changes a task."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        """Wake the waiter."""
        self._event.set()

    def clear(self) -> None:
        """Re-arm after a wakeup."""
        if self._event.is_set():
            self._event = anyio.Event()

    async def wait(self) -> None:
        """Until the next change (the caller bounds it with a poll interval)."""
        await self._event.wait()


class TaskStore:
    """The durable task rows; a terminal status is never overwritten (the first terminal state wins)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._watchers: set[Changed] = set()
        #: Answers from ``tasks/update`` for the tasks this process runs that wait in :meth:`TaskHandle.ask`.
        self._inboxes: dict[str, asyncio.Queue[dict[str, Any]]] = {}

    @contextlib.contextmanager
    def watch(self) -> Iterator[Changed]:
        """A flag set at every task change made by this process, for as long as the block runs."""
        changed = Changed()
        self._watchers.add(changed)
        try:
            yield changed
        finally:
            self._watchers.discard(changed)

    def open_inbox(self, task_id: str) -> asyncio.Queue[dict[str, Any]]:
        """Where ``tasks/update`` answers for this task go while a call of this process waits for them."""
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._inboxes[task_id] = inbox
        return inbox

    def close_inbox(self, task_id: str) -> None:
        """The call stopped waiting: answers are no longer handed over."""
        self._inboxes.pop(task_id, None)

    def deliver(self, task_id: str, answered: dict[str, Any]) -> None:
        """Hand ``tasks/update`` answers to the task's waiting call, when this process runs it."""
        inbox = self._inboxes.get(task_id)
        if inbox is not None:
            inbox.put_nowait(answered)

    def _wake(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker thread: the watchers' poll sees the change
            return
        for changed in list(self._watchers):
            changed.set()

    def create(self, tool: str, agent: str | None = None) -> dict[str, Any]:
        """A new ``working`` task of ``agent``, committed before its id is returned to anyone."""
        from sqlalchemy import insert

        from baton.evidence.canonical import iso
        from baton.store.schema import mcp_tasks

        now = clock.time()
        task_id = f"task_{uuid.uuid4().hex}"
        with self.runtime.store.write() as connection:
            connection.execute(
                insert(mcp_tasks).values(
                    id=task_id,
                    tool=tool,
                    status="working",
                    owner=self.runtime.instance_id,
                    created_at=iso(now),
                    last_updated_at=iso(now),
                    expires_epoch=now + TASK_TTL_SECONDS,
                    agent=agent,
                )
            )
        row = self.get(task_id)
        assert row is not None
        return row

    def get(self, task_id: str) -> dict[str, Any] | None:
        """The task's row as a dict, or None."""
        from sqlalchemy import select

        from baton.store.schema import mcp_tasks

        with self.runtime.store.read() as connection:
            row = connection.execute(select(mcp_tasks).where(mcp_tasks.c.id == task_id)).first()
        return dict(row._mapping) if row is not None else None

    def set(self, task_id: str, **values: Any) -> bool:
        """Update a non-terminal task; False when it already ended (the update is dropped)."""
        from sqlalchemy import update

        from baton.evidence.canonical import iso
        from baton.store.schema import mcp_tasks

        with self.runtime.store.write() as connection:
            result = connection.execute(
                update(mcp_tasks)
                .where(mcp_tasks.c.id == task_id, mcp_tasks.c.status.not_in(TERMINAL))
                .values(**values, last_updated_at=iso(clock.time()))
            )
        if result.rowcount == 1:
            self._wake()
        return bool(result.rowcount == 1)


def wire(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the extension's ``DetailedTask``."""
    task: dict[str, Any] = {
        "taskId": row["id"],
        "status": row["status"],
        "createdAt": row["created_at"],
        "lastUpdatedAt": row["last_updated_at"],
        "ttlMs": TASK_TTL_SECONDS * 1000,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if row["status_message"]:
        task["statusMessage"] = row["status_message"]
    if row["status"] == "input_required":
        task["inputRequests"] = row["input_requests"] or {}
    if row["status"] == "completed":
        task["result"] = row["result"]
    if row["status"] == "failed":
        task["error"] = row["error"]
    return task


class TaskHandle:
    """What a tool running as a task may tell it: the request it waits on, input it needs from the client."""

    def __init__(self, store: TaskStore, task_id: str) -> None:
        self.store = store
        self.task_id = task_id

    def waiting_for(self, request_id: str) -> None:
        """The task now waits on this human-in-the-loop request."""
        self.store.set(
            self.task_id, request_id=request_id, status_message=f"Waiting for a human ({request_id})."
        )

    def needs_input(self, input_requests: dict[str, Any]) -> None:
        """Surface client requests (an elicitation) on ``tasks/get`` until ``tasks/update`` answers them."""
        self.store.set(self.task_id, status="input_required", input_requests=input_requests)

    async def ask(self, input_requests: dict[str, Any]) -> dict[str, Any]:
        """Surface ``input_requests`` and wait until ``tasks/update`` has answered every key (the client may
        answer them one at a time); the task is ``working`` again once they are all in."""
        inbox = self.store.open_inbox(self.task_id)
        answers: dict[str, Any] = {}
        try:
            self.needs_input(input_requests)
            while not input_requests.keys() <= answers.keys():
                answers.update(await inbox.get())
        finally:
            self.store.close_inbox(self.task_id)
        self.store.set(self.task_id, status="working", input_requests=None)
        return answers
