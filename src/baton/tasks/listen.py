"""Task status notifications of the Tasks extension: ``subscriptions/listen`` with a ``taskIds`` filter.

A 2026-07-28 client that declared ``io.modelcontextprotocol/tasks`` opens a listen stream naming the tasks it
follows. The stream is acknowledged with the ids baton agreed to follow (the known ones the caller created; another
agent's task is left out exactly as an unknown id is), then carries one
``notifications/tasks`` with the task's ``DetailedTask`` (what ``tasks/get`` would answer) at once and at every
change of the task (a new ``lastUpdatedAt``: its status, status message or input requests), until every followed task reached a terminal state; then the stream ends gracefully
(``SubscriptionsListenResult``). A client that did not declare the extension and asks for task notifications
gets ``-32021``, as the extension requires. baton publishes no list-change events (its tool list changes only
with a gateway promotion, which clients pick up at their next ``tools/list``), so the other filter kinds are
never honored and the ``listChanged`` capabilities stay false.

Changes are seen at once when this process changed the task (:meth:`baton.tasks.store.TaskStore.set` wakes the
streams) and within :data:`POLL_SECONDS` when another replica, or a decision on the human request a task
waits on, changed it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

if TYPE_CHECKING:
    from baton.tasks.extension import TasksExtension

#: The most task ids one stream may follow; more is invalid params.
MAX_TASK_IDS = 100
#: How often a stream re-reads its tasks from the store (changes in this process wake it at once).
POLL_SECONDS = 0.5
#: Open streams per process; one more is refused before its acknowledgement (as the SDK's handler does).
MAX_STREAMS = 256
NOTIFICATION_METHOD = "notifications/tasks"


def _invalid(message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=types.INVALID_PARAMS, message=message)


def requested_task_ids(params: types.SubscriptionsListenRequestParams) -> list[str] | None:
    """The ``taskIds`` of the filter (an extension key), or None when the client asked for no task."""
    raw = (params.notifications.model_extra or {}).get("taskIds")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(item, str) and 0 < len(item) <= 64 for item in raw):
        raise _invalid("notifications.taskIds must be a list of task ids.")
    if len(raw) > MAX_TASK_IDS:
        raise _invalid(f"notifications.taskIds may name at most {MAX_TASK_IDS} tasks.")
    return list(dict.fromkeys(raw))


def _follows(row: dict[str, Any] | None, scope: str | None) -> bool:
    """Whether a stream of the caller with ``scope`` may follow the task: another agent's task is treated as
    an unknown id (not acknowledged, never streamed), as ``tasks/get`` treats it."""
    return row is not None and (scope is None or row["agent"] == scope)


class ListenHandler:
    """Serves ``subscriptions/listen`` for task status notifications (one call is one stream)."""

    def __init__(self, extension: TasksExtension) -> None:
        self.extension = extension
        self.open_streams = 0

    async def __call__(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Acknowledge the honored task ids, then push each task's state until all of them ended."""
        from baton.tasks.extension import client_declared, missing_capability

        if "taskIds" in (params.notifications.model_extra or {}) and not client_declared(ctx):
            raise missing_capability()  # before judging the ids: the capability is what is missing
        task_ids = requested_task_ids(params)
        if ctx.request_id is None:
            raise _invalid("subscriptions/listen requires a request id.")
        if self.open_streams >= MAX_STREAMS:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INTERNAL_ERROR, message="Subscription limit reached")
        self.open_streams += 1
        try:
            return await self._serve(ctx, task_ids)
        finally:
            self.open_streams -= 1

    async def _serve(self, ctx: Any, task_ids: list[str] | None) -> types.SubscriptionsListenResult:
        from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

        from baton.tasks.store import TERMINAL

        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        store = await self.extension.store()
        scope = (await self.extension.caller(ctx)).write_scope
        rows = {task_id: store.get(task_id) for task_id in task_ids or []}
        honored = [task_id for task_id, row in rows.items() if _follows(row, scope)]
        asked = {"taskIds": honored} if task_ids is not None else {}
        notifications = types.SubscriptionFilter.model_validate(asked)
        ack = types.SubscriptionsAcknowledgedNotification(
            params=types.SubscriptionsAcknowledgedNotificationParams(notifications=notifications, _meta=meta)
        )
        await ctx.session.send_notification(ack, related_request_id=ctx.request_id)
        seen: dict[str, tuple[str, str]] = {}
        following = set(honored)
        with store.watch() as changed:
            while following:
                changed.clear()  # before reading: a change from here on wakes the wait below
                for task_id in sorted(following):
                    row = self.extension.current(store, task_id)
                    if row is None:
                        following.discard(task_id)
                        continue
                    mark = (row["status"], row["last_updated_at"])
                    if seen.get(task_id) != mark:
                        seen[task_id] = mark
                        await self._notify(ctx, row, meta)
                    if row["status"] in TERMINAL:
                        following.discard(task_id)
                if following:
                    with anyio.move_on_after(POLL_SECONDS):
                        await changed.wait()
        return types.SubscriptionsListenResult(_meta=meta)

    @staticmethod
    async def _notify(ctx: Any, row: dict[str, Any], meta: dict[str, Any]) -> None:
        from baton.tasks.store import wire

        params = {**wire(row), "_meta": meta}
        notification = types.Notification[dict[str, Any], str](method=NOTIFICATION_METHOD, params=params)
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
