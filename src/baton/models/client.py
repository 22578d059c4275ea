"""The governed model client: every model call reserved against the daily budget, sent through pydantic-ai,
receipted and priced; the request log and the receipt file.

Provider SDKs import slowly, so nothing here imports pydantic-ai until the first call (the provider and its
model are :mod:`baton.models.providers`).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from baton.config import Settings
from baton.errors import BatonError, ProviderError
from baton.evidence.receipts import Receipt, ReceiptLog, Redactor
from baton.models.budgets import DailyBudget, Reservation, estimate_tokens
from baton.models.estimates import OutputEstimate, recorded_outputs
from baton.models.pricing import Price, price_call
from baton.models.providers import (
    ProviderConfig,
    build_model,
    model_instrumentation,
    provider_failure,
    resolve_provider,
)
from baton.models.pydantic_ai_imports import aload_pydantic_ai, load_pydantic_ai
from baton.store.engine import DriverTransaction
from baton.telemetry.metrics import RECORDER

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
    from sqlalchemy import Connection

Purpose = Literal["context_preparation", "subagent_turn"]


@dataclass(frozen=True)
class ModelReply:
    """A model's answer with its receipt payload."""

    text: str
    input_tokens: int
    output_tokens: int
    receipt: dict[str, Any]

    @property
    def cost_usd(self) -> float | None:
        """The call's price in US dollars, or None for an unpriced model."""
        cost = self.receipt.get("cost_usd")
        return None if cost is None else float(cost)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ChatTurn:
    """One message of a conversation as baton stores it."""

    role: Literal["user", "assistant"]
    content: str


class ModelClient:
    """Calls the configured model and writes a receipt for every call."""

    def __init__(self, settings: Settings, receipts: ReceiptLog, redactor: Redactor) -> None:
        self.settings = settings
        self.receipts = receipts
        self.redactor = redactor
        self._model: Model | None = None
        self._config: ProviderConfig | None = None
        self._file_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._file_rows: list[dict[str, Any]] | None = None
        self.daily = DailyBudget(receipts.store, settings)
        self._outputs: OutputEstimate | None = None

    def config(self) -> ProviderConfig:
        """The resolved provider, or ``provider_not_configured``."""
        if self._config is None:
            self._config = resolve_provider(self.settings)
        return self._config

    def model(self) -> Model:
        """The pydantic-ai model, built once on first use."""
        with self._model_lock:
            if self._model is None:
                self._model = build_model(self.config(), self.settings)
            return self._model

    async def amodel(self) -> Model:
        """:meth:`model` from async code: a build (seconds of imports) runs in a worker thread, and waiting for
        the warm-up's build in progress never blocks the event loop."""
        if self._model is not None:
            return self._model
        return await asyncio.to_thread(self.model)

    async def complete(
        self,
        system: str,
        turns: list[ChatTurn],
        *,
        purpose: Purpose,
        subagent_id: str | None,
        answer_in: Callable[[Connection | DriverTransaction, ModelReply], None] | None = None,
    ) -> ModelReply:
        """Send one request; map every provider failure to a typed error; receipt and price the success.

        The daily budget is reserved first: a call that does not fit is refused before the model sees it.
        ``answer_in`` records the caller's answer in the receipt's transaction (see :meth:`governed_call`).
        """
        await aload_pydantic_ai()
        messages = to_model_messages(system, turns)
        self._log_request(system, turns, purpose, subagent_id)
        settings = self.request_settings()

        async def send(model: Model) -> ModelResponse:
            from pydantic_ai.direct import model_request

            return await model_request(
                model, messages, model_settings=settings, instrument=model_instrumentation()
            )

        _response, reply = await self.governed_call(
            send,
            prompt_chars=_prompt_chars(messages),
            purpose=purpose,
            subagent_id=subagent_id,
            answer_in=answer_in,
        )
        return reply

    def request_settings(self) -> ModelSettings:
        """The model settings of every call: the output cap and the timeout."""
        return {
            "max_tokens": self.settings.collab_max_tokens,
            "timeout": self.settings.collab_model_timeout_seconds,
        }

    async def governed_call(
        self,
        send: Callable[[Model], Awaitable[ModelResponse]],
        *,
        prompt_chars: int,
        purpose: Purpose,
        subagent_id: str | None,
        links: dict[str, Any] | None = None,
        record_in: Callable[[Connection | DriverTransaction, ModelReply, Receipt], None] | None = None,
        answer_in: Callable[[Connection | DriverTransaction, ModelReply], None] | None = None,
    ) -> tuple[ModelResponse, ModelReply]:
        """The one path of every model call: reserve the budget, send, receipt and settle (or release).

        ``links`` go into the receipt's payload. ``record_in`` (given the written receipt, whose seq and
        sha256 a governed turn's tool calls link to) and ``answer_in`` run in the receipt's transaction,
        with statements of :mod:`baton.store.prepared` only: on SQLite it is held on the kept driver connection
        (no pool checkout, no SQLAlchemy transaction). A failed call is receipted with its
        ``error_class``; a cancelled one leaves no receipt and its reservation is released.
        """
        config = self.config()
        model = await self.amodel()
        # the reservation is the call's one budget transaction: it refuses a day already spent too
        reservation = self.daily.reserve(*self._estimate(config, prompt_chars))
        settled = False
        started = time.perf_counter()
        try:
            try:
                response = await send(model)
            except BatonError:
                raise
            except Exception as exc:
                raise self._receipt_failed_call(exc, config, purpose, subagent_id, started, links) from None
            reply, price = answered_call_reply(
                config, response, time.perf_counter() - started, purpose, subagent_id, links
            )
            self._receipt_and_settle(reservation, reply, price.cost_usd, record_in, answer_in)
            settled = True
            self.outputs().record(reply.output_tokens)
        finally:
            if not settled:
                self.daily.release(reservation)
        RECORDER.model_call(
            config.provider, config.model, reply.input_tokens, reply.output_tokens, price.cost_usd
        )
        self._append_receipt_file(reply.receipt)
        return response, reply

    def _receipt_failed_call(
        self,
        exc: Exception,
        config: ProviderConfig,
        purpose: Purpose,
        subagent_id: str | None,
        started: float,
        links: dict[str, Any] | None,
    ) -> ProviderError:
        """The typed error of a provider's failure, once its receipt is appended (in its own transaction)."""
        failure = provider_failure(exc, self.redactor)
        payload = failed_call_receipt(config, purpose, subagent_id, time.perf_counter() - started, failure)
        self.receipts.append("model_call", {**(links or {}), **payload})
        return failure

    def _receipt_and_settle(
        self,
        reservation: Reservation,
        reply: ModelReply,
        cost_usd: float | None,
        record_in: Callable[[Connection | DriverTransaction, ModelReply, Receipt], None] | None,
        answer_in: Callable[[Connection | DriverTransaction, ModelReply], None] | None,
    ) -> None:
        """One transaction: the answered call's receipt, its budget settlement, ``record_in``, ``answer_in``."""
        with self.receipts.store.write_prepared() as transaction:
            written = self.receipts.append_in(transaction, "model_call", reply.receipt)
            self.daily.settle_in(transaction, reservation, reply.input_tokens, reply.output_tokens, cost_usd)
            if record_in is not None:
                record_in(transaction, reply, written)
            if answer_in is not None:
                answer_in(transaction, reply)

    def outputs(self) -> OutputEstimate:
        """The output tokens the next call reserves, learned from the model's answers (seeded from the
        chain when a daily budget needs it)."""
        if self._outputs is None:
            config, store = self.config(), self.receipts.store
            seed = (
                (lambda: recorded_outputs(store, config.provider, config.model))
                if self.daily.enabled
                else None
            )
            self._outputs = OutputEstimate(self.settings.collab_max_tokens, seed)
        return self._outputs

    def _estimate(self, config: ProviderConfig, prompt_chars: int) -> tuple[int, float]:
        """A (tokens, dollars) estimate of one call for the budget reservation: the prompt's size and the
        output length learned from the model's recent answers (see :mod:`baton.models.estimates`)."""
        output = self.outputs().tokens() if self.daily.enabled else self.settings.collab_max_tokens
        tokens = estimate_tokens(prompt_chars, output)
        if self.daily.limits.max_cost_usd is None:
            return tokens, 0.0
        load_pydantic_ai()
        from pydantic_ai.usage import RequestUsage

        usage = RequestUsage(input_tokens=tokens - output, output_tokens=output)
        return tokens, price_call(config.provider, config.model, usage).cost_usd or 0.0

    async def aclose(self) -> None:
        """Close the provider's HTTP connections."""
        client = getattr(self._model, "client", None)
        if client is not None and hasattr(client, "close"):
            await client.close()
        self._model = None

    def _log_request(self, system: str, turns: list[ChatTurn], purpose: str, subagent_id: str | None) -> None:
        """Append what is about to be sent to ``BATON_MODEL_REQUEST_LOG`` (JSON lines), for audits."""
        if self.settings.baton_model_request_log is None:
            return
        row = {
            "purpose": purpose,
            "subagent_id": subagent_id,
            "system": system,
            "messages": [{"role": t.role, "content": t.content} for t in turns],
        }
        self._write_log_row(row)

    def log_model_messages(self, messages: list[Any], purpose: str, subagent_id: str | None) -> None:
        """Append a tool loop's request (pydantic-ai messages, tool calls and results included) to the log."""
        if self.settings.baton_model_request_log is None:
            return
        load_pydantic_ai()
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        dumped = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        self._write_log_row({"purpose": purpose, "subagent_id": subagent_id, "messages": dumped})

    def _write_log_row(self, row: dict[str, Any]) -> None:
        path = self.settings.baton_model_request_log
        assert path is not None
        line = json.dumps(self.redactor.value(row), ensure_ascii=False) + "\n"
        self.redactor.guard(line, str(path))
        from baton.store.private import append_private

        with self._file_lock:
            append_private(path, line)

    def _append_receipt_file(self, receipt: dict[str, Any]) -> None:
        """Rewrite ``COLLAB_LLM_RECEIPT_PATH`` atomically with every receipt so far."""
        path = self.settings.collab_llm_receipt_path
        if path is None:
            return
        with self._file_lock:
            if self._file_rows is None:
                self._file_rows = _read_rows(path)
            self._file_rows.append(self.redactor.value(receipt))
            text = json.dumps(self._file_rows, ensure_ascii=False, indent=2) + "\n"
            self.redactor.guard(text, str(path))
            write_atomic(path, text)


def answered_call_reply(
    config: ProviderConfig,
    response: ModelResponse,
    latency: float,
    purpose: Purpose,
    subagent_id: str | None,
    links: dict[str, Any] | None,
) -> tuple[ModelReply, Price]:
    """The reply of a model call that answered (its text and usage, its receipt's payload) and its price."""
    text = "".join(getattr(part, "content", "") for part in response.parts if part.part_kind == "text")
    usage = response.usage
    input_tokens, output_tokens = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
    price = price_call(config.provider, config.model, usage, response.model_name)
    # the links come first, so no link can overwrite what the call itself measured
    receipt = {
        **(links or {}),
        "response": {"id": response.provider_response_id, "model": response.model_name or config.model},
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
        **price.receipt_fields(),
        "latency_seconds": round(latency, 6),
        "provider": config.provider,
        "purpose": purpose,
        "subagent_id": subagent_id,
    }
    reply = ModelReply(text=text, input_tokens=input_tokens, output_tokens=output_tokens, receipt=receipt)
    return reply, price


def failed_call_receipt(
    config: ProviderConfig, purpose: Purpose, subagent_id: str | None, latency: float, failure: ProviderError
) -> dict[str, Any]:
    """The chain's receipt of a model call that failed: no response, no usage, its ``error_class``.

    It goes to the chain only: ``COLLAB_LLM_RECEIPT_PATH`` keeps the reference runner's shape (answered
    calls, each with a response id).
    """
    return {
        "response": {"id": None, "model": config.model},
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "latency_seconds": round(latency, 6),
        "provider": config.provider,
        "purpose": purpose,
        "subagent_id": subagent_id,
        "error_class": failure.error_class,
    }


def _prompt_chars(messages: list[Any]) -> int:
    """The characters of what is sent (every part's content), for the budget estimate."""
    return sum(len(str(getattr(part, "content", ""))) for message in messages for part in message.parts)


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return rows if isinstance(rows, list) else []


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (mkstemp: mode 0600) and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_model_messages(system: str, turns: list[ChatTurn]) -> list[Any]:
    """Baton's stored conversation as pydantic-ai messages (the system prompt leads the first request)."""
    load_pydantic_ai()
    from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

    messages: list[Any] = []
    for index, turn in enumerate(turns):
        if turn.role == "user":
            parts: list[Any] = [UserPromptPart(content=turn.content)]
            if index == 0:
                parts.insert(0, SystemPromptPart(content=system))
            messages.append(ModelRequest(parts=parts))
        else:
            messages.append(ModelResponse(parts=[TextPart(content=turn.content)]))
    return messages
