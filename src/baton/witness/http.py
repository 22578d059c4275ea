"""The witness's HTTP interface (c2sp.org/tlog-witness): ``POST /add-checkpoint`` and
``GET /<origin hash>/checkpoint``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from baton.witness.core import Witness

#: A request body past this is refused unread (a proof line is 45 bytes).
MAX_BODY_BYTES = 8 * 1024 * 1024


def build_app(witness: Witness) -> Starlette:
    """An ASGI app serving ``witness``."""

    async def add_checkpoint(request: Request) -> Response:
        """tlog-witness add-checkpoint, the check-and-cosign run off the event loop."""
        if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
            return PlainTextResponse("request too large\n", status_code=413)
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return PlainTextResponse("request too large\n", status_code=413)
        from anyio import to_thread

        answer = await to_thread.run_sync(witness.add_checkpoint, body)
        # the content type exactly as given: tlog-witness names text/x.tlog.size, without a charset
        return Response(
            answer.body.encode(), status_code=answer.status, headers={"content-type": answer.content_type}
        )

    async def checkpoint(request: Request) -> Response:
        """The monitoring endpoint: the newest cosigned checkpoint of one log."""
        note = witness.latest(str(request.path_params["origin_hash"]))
        if note is None:
            return PlainTextResponse("never cosigned a checkpoint of this log\n", status_code=404)
        return PlainTextResponse(note)

    return Starlette(
        routes=[
            Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
            Route("/{origin_hash}/checkpoint", checkpoint, methods=["GET"]),
        ]
    )
