"""The chat routes' refusals: JSON ``{success: false, error, error_class}``, counted when a secret failed."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from baton.errors import BatonError
from baton.http.guards import AUTH_FAILED_KEY


def refuse(request: Request, status: int, exc: BatonError, *, auth_failed: bool = False) -> JSONResponse:
    """A refusal; ``auth_failed`` counts it toward the address's lockout (http_guards.AuthThrottle)."""
    if auth_failed:
        request.scope.setdefault("state", {})[AUTH_FAILED_KEY] = True
    return JSONResponse(exc.to_result(), status_code=status, headers={"Cache-Control": "no-store"})
