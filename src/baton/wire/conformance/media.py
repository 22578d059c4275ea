"""The fixtures' small media and content blocks (a 1x1 PNG, an eight-sample WAV)."""

from __future__ import annotations

from typing import Any

#: Any non-None value routes a notification or request on the tool call's own stream (ServerSession).
REQUEST_SCOPED = "conformance-call"
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
WAV_BASE64 = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def image() -> dict[str, Any]:
    """The PNG as an image content block."""
    return {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}


def audio() -> dict[str, Any]:
    """The WAV as an audio content block."""
    return {"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}


def embedded(uri: str, mime_type: str, body: str) -> dict[str, Any]:
    """An embedded text resource content block."""
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": body}}


def elicitation(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An ``elicitation/create`` input request (2026-07-28 MRTR) for a flat form."""
    schema = {"type": "object", "properties": properties, "required": required}
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def sampling(prompt: str, max_tokens: int) -> dict[str, Any]:
    """A ``sampling/createMessage`` input request with one user message."""
    messages = [{"role": "user", "content": text(prompt)}]
    return {"method": "sampling/createMessage", "params": {"messages": messages, "maxTokens": max_tokens}}


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def plain(answers: Any) -> dict[str, Any]:
    """``inputResponses`` as JSON objects by key (the SDK hands them over as typed results)."""
    if not isinstance(answers, dict):
        return {}
    return {key: _as_json(value) for key, value in answers.items()}


def _as_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(by_alias=True, mode="json", exclude_none=True) if callable(dump) else value


def answer_text(answer: Any, field: str) -> str:
    """One field of an elicitation answer's content ("unknown" when it is missing or not text)."""
    content = answer.get("content") if isinstance(answer, dict) else None
    value = content.get(field) if isinstance(content, dict) else None
    return value if isinstance(value, str) else "unknown"
