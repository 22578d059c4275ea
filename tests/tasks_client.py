"""A client side of the Tasks extension for tests, built on the official client's extension API.

The official ``mcp`` 2.3.0 client has no tasks runtime, but its ``ClientExtension``/``ResultClaim`` API lets a
client claim the extension's ``resultType: "task"`` and finish it: this one polls ``tasks/get`` (honouring
``pollIntervalMs`` loosely), answers ``inputRequests`` with ``tasks/update`` through an elicitation callback,
and returns the task's final ``CallToolResult``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from pydantic import ConfigDict, Field

EXTENSION_ID = "io.modelcontextprotocol/tasks"


class CreateTaskResult(types.Result):
    """The extension's task handle (``resultType: "task"``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskState(types.Result):
    """A ``tasks/get`` answer (the DetailedTask), kept whole."""

    model_config = ConfigDict(extra="allow")


async def task_request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send one extension request and return its raw result."""
    request = types.Request[dict[str, Any], str](method=method, params=params)
    answer = await session.send_request(request, TaskState)
    return dict(answer.model_dump(by_alias=True, exclude_none=True)) | dict(answer.model_extra or {})


Elicit = Callable[[Any], Awaitable[dict[str, Any]]]


class TaskNotification(types.NotificationParams):
    """``notifications/tasks`` params: a whole DetailedTask (kept whole) and the stream's ``_meta``."""

    model_config = ConfigDict(extra="allow")


class TasksClient(ClientExtension):
    """Declares the extension; finishes tasks by polling, answering input requests with ``elicit``; keeps the
    ``notifications/tasks`` it receives (on a ``subscriptions/listen`` stream) in ``notified``."""

    identifier = EXTENSION_ID

    def __init__(self, elicit: Elicit | None = None) -> None:
        self.elicit = elicit
        self.created: list[str] = []
        self.states: list[dict[str, Any]] = []
        self.notified: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [
            NotificationBinding(method="notifications/tasks", params_type=TaskNotification, handler=self.keep)
        ]

    async def keep(self, params: TaskNotification) -> None:
        self.notified.append(
            params.model_dump(by_alias=True, exclude_none=True) | dict(params.model_extra or {})
        )

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created.task_id)
        answered: set[str] = set()
        with anyio.fail_after(300):
            while True:
                state = await task_request(ctx.session, "tasks/get", {"taskId": created.task_id})
                self.states.append(state)
                if state["status"] == "completed":
                    return types.CallToolResult.model_validate(state["result"])
                if state["status"] in ("failed", "cancelled"):
                    raise RuntimeError(f"task {created.task_id} ended {state['status']}: {state}")
                pending = {k: v for k, v in (state.get("inputRequests") or {}).items() if k not in answered}
                if pending and self.elicit is not None:
                    responses = {key: await self.elicit(request) for key, request in pending.items()}
                    answered.update(responses)
                    await task_request(
                        ctx.session, "tasks/update", {"taskId": created.task_id, "inputResponses": responses}
                    )
                await anyio.sleep(0.05)
