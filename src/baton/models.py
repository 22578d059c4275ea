"""Model providers through pydantic-ai, and the receipt every model call leaves.

Provider SDKs import slowly, so nothing here imports pydantic-ai until the first call.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from baton.budgets import DailyBudget, estimate_tokens
from baton.config import Settings
from baton.errors import BatonError, ProviderError
from baton.metrics import RECORDER
from baton.pricing import price_call
from baton.pydantic_ai_imports import IMPORT_LOCK, aload_pydantic_ai, load_pydantic_ai
from baton.receipts import Receipt, ReceiptLog, Redactor
from baton.store import DriverTransaction
from baton.tracing import http_event_hooks, model_instrumentation

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
    from sqlalchemy import Connection

Purpose = Literal["context_preparation", "subagent_turn"]

PROVIDERS = ("moonshot", "openai", "anthropic", "openrouter", "ollama", "openai-compatible")

#: Model used when OPENAI_MODEL is unset.
DEFAULT_MODELS = {
    "moonshot": "kimi-k3",
    "openai": "gpt-4o-mini",
    "anthropic": "claude-haiku-4-5",
    "openrouter": "moonshotai/kimi-k2",
    "ollama": "llama3.2",
    "openai-compatible": None,
}

DEFAULT_BASE_URLS = {
    "moonshot": "https://api.moonshot.ai/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://127.0.0.1:11434/v1",
}


@dataclass(frozen=True)
class ProviderConfig:
    """The resolved provider: its name, model, endpoint and key (never printed)."""

    provider: str
    model: str
    base_url: str | None
    api_key: str | None = field(repr=False)


def resolve_provider(settings: Settings) -> ProviderConfig:
    """Pick the provider from the settings, or say exactly what is missing."""
    name = (settings.collab_provider or "").strip().lower()
    if not name:
        raise ProviderError(
            "provider_not_configured",
            "No model provider is configured: set COLLAB_PROVIDER.",
            missing=["COLLAB_PROVIDER"],
        )
    if name not in PROVIDERS:
        raise ProviderError(
            "provider_unknown", f"COLLAB_PROVIDER={name!r} is not one of {', '.join(PROVIDERS)}."
        )
    keys: dict[str, tuple[str | None, list[str]]] = {
        "moonshot": (settings.moonshot_api_key or settings.kimi_api_key, ["MOONSHOT_API_KEY"]),
        "openai": (settings.openai_api_key, ["OPENAI_API_KEY"]),
        "anthropic": (settings.anthropic_api_key, ["ANTHROPIC_API_KEY"]),
        "openrouter": (settings.openrouter_api_key, ["OPENROUTER_API_KEY"]),
        "ollama": (settings.openai_api_key, []),
        "openai-compatible": (settings.openai_api_key, []),
    }
    api_key, needed = keys[name]
    missing = [] if api_key else list(needed)
    base_url = settings.openai_base_url or DEFAULT_BASE_URLS.get(name)
    if name == "openai-compatible" and not base_url:
        missing.append("OPENAI_BASE_URL")
    model = settings.openai_model or DEFAULT_MODELS[name]
    if not model:
        missing.append("OPENAI_MODEL")
    if missing:
        raise ProviderError(
            "provider_not_configured", f"The {name} provider needs {', '.join(missing)}.", missing=missing
        )
    assert model is not None
    return ProviderConfig(provider=name, model=model, base_url=base_url, api_key=api_key)


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
        with statements of :mod:`baton.prepared` only: on SQLite it is held on the kept driver connection
        (no pool checkout, no SQLAlchemy transaction). A failed call is receipted with its
        ``error_class``; a cancelled one leaves no receipt and its reservation is released.
        """
        config = self.config()
        model = self.model()
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
                failure = provider_failure(exc, self.redactor)
                payload = failed_call_receipt(
                    config, purpose, subagent_id, time.perf_counter() - started, failure
                )
                self.receipts.append("model_call", {**payload, **(links or {})})
                raise failure from None
            latency = time.perf_counter() - started
            text = "".join(
                getattr(part, "content", "") for part in response.parts if part.part_kind == "text"
            )
            usage = response.usage
            input_tokens, output_tokens = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
            price = price_call(config.provider, config.model, usage, response.model_name)
            receipt = {
                "response": {
                    "id": response.provider_response_id,
                    "model": response.model_name or config.model,
                },
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
                **(links or {}),
            }
            reply = ModelReply(
                text=text, input_tokens=input_tokens, output_tokens=output_tokens, receipt=receipt
            )
            cost = price.cost_usd
            with self.receipts.store.write_prepared() as transaction:
                written = self.receipts.append_in(transaction, "model_call", receipt)
                self.daily.settle_in(transaction, reservation, input_tokens, output_tokens, cost)
                if record_in is not None:
                    record_in(transaction, reply, written)
                if answer_in is not None:
                    answer_in(transaction, reply)
            settled = True
        finally:
            if not settled:
                self.daily.release(reservation)
        RECORDER.model_call(config.provider, config.model, input_tokens, output_tokens, price.cost_usd)
        self._append_receipt_file(receipt)
        return response, reply

    def _estimate(self, config: ProviderConfig, prompt_chars: int) -> tuple[int, float]:
        """A generous (tokens, dollars) estimate of one call, for the budget reservation."""
        tokens = estimate_tokens(prompt_chars, self.settings.collab_max_tokens)
        if self.daily.limits.max_cost_usd is None:
            return tokens, 0.0
        load_pydantic_ai()
        from pydantic_ai.usage import RequestUsage

        output = self.settings.collab_max_tokens
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
        from baton.private import append_private

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


def build_model(config: ProviderConfig, settings: Settings) -> Model:
    """The pydantic-ai model object for a resolved provider (its modules imported under the import lock)."""
    load_pydantic_ai()
    with IMPORT_LOCK:
        if config.provider == "anthropic":
            from anthropic import AsyncAnthropic
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            client = AsyncAnthropic(
                api_key=config.api_key,
                base_url=config.base_url,
                max_retries=1,
                timeout=settings.collab_model_timeout_seconds,
                http_client=_http_client("anthropic"),
            )
            return AnthropicModel(config.model, provider=AnthropicProvider(anthropic_client=client))

        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel

        client_openai = AsyncOpenAI(
            api_key=config.api_key or "not-needed",
            base_url=config.base_url,
            max_retries=1,
            timeout=settings.collab_model_timeout_seconds,
            http_client=_http_client("openai"),
        )
        provider: Any
        if config.provider == "moonshot":
            from pydantic_ai.providers.moonshotai import MoonshotAIProvider

            provider = MoonshotAIProvider(openai_client=client_openai)
        elif config.provider == "openrouter":
            from pydantic_ai.providers.openrouter import OpenRouterProvider

            provider = OpenRouterProvider(openai_client=client_openai)
        else:
            from pydantic_ai.providers.openai import OpenAIProvider

            provider = OpenAIProvider(openai_client=client_openai)
        return OpenAIChatModel(config.model, provider=provider)


#: Idle connections the provider client keeps open between calls (the SDKs' default is 100; concurrency
#: is not capped: up to 1,000 calls still run at once). httpx's pool (anthropic's client) checks every
#: idle connection for a server disconnect on each request it starts or ends (a socket-readable probe, a
#: syscall each), so under a fan-out of hundreds of subagents 100 idle connections made that probe a large
#: part of the client's CPU; 20 keeps a warm pool for ordinary use (docs/benchmarks.md, "fanout").
#: aiohttp's connector (openai's client) takes only the total, from ``max_connections``.
KEEPALIVE_CONNECTIONS = 20
MAX_CONNECTIONS = 1000


def _http_client(sdk: str) -> Any:
    """The provider SDK's own HTTP client, with baton's pool limits and, while tracing is active, the hooks
    that put the trace context on each request.

    openai's client sends over aiohttp (the SDK's ``aiohttp`` extra): the same httpx API and event hooks,
    at less than half the CPU per request under a fan-out (docs/benchmarks.md, "p3-cpu").
    """
    import httpx2

    hooks = http_event_hooks()
    options: dict[str, Any] = {
        "limits": httpx2.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=KEEPALIVE_CONNECTIONS
        ),
        **({"event_hooks": hooks} if hooks is not None else {}),
    }
    if sdk == "anthropic":
        from anthropic import DefaultAsyncHttpxClient as AnthropicHttpx

        return AnthropicHttpx(**options)
    from openai import DefaultAioHttpClient

    return DefaultAioHttpClient(**options)


def _connection_error(exc: BaseException) -> BaseException | None:
    """The refused or broken connection that caused ``exc`` (None when there is none, or a timeout did).

    openai's aiohttp transport turns every aiohttp connection error, a refused connect too, into httpx's
    ``ConnectTimeout``, so the SDK reports an unreachable provider as a timeout; the cause chain still
    holds what happened.
    """
    aiohttp = sys.modules.get("aiohttp")
    kinds: tuple[type[BaseException], ...] = (ConnectionError,)
    if aiohttp is not None:
        kinds = (ConnectionError, aiohttp.ClientConnectionError)
    found: BaseException | None = None
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, TimeoutError):
            return None
        if found is None and isinstance(link, kinds):
            found = link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return found


def provider_failure(exc: Exception, redactor: Redactor) -> ProviderError:
    """A provider exception as a typed error whose message holds no secret."""
    load_pydantic_ai()
    from pydantic_ai import exceptions as pe

    detail = redactor.text(str(exc))[:300]
    status = getattr(exc, "status_code", None)
    if isinstance(exc, pe.ModelHTTPError) or status is not None:
        return ProviderError(
            "provider_http_error", f"The model provider answered HTTP {status}: {detail}", status_code=status
        )
    connection = _connection_error(exc)
    if connection is not None:
        reason = redactor.text(str(connection))[:300]
        return ProviderError(
            "provider_connection_failed", f"The model provider could not be reached: {reason}"
        )
    if (
        isinstance(exc, pe.ModelTimeoutError | pe.ModelRequestTimeout | TimeoutError)
        or "timed out" in detail.lower()
    ):
        return ProviderError("provider_timeout", "The model provider did not answer in time.")
    if isinstance(exc, pe.ModelConnectionError):
        return ProviderError(
            "provider_connection_failed", f"The model provider could not be reached: {detail}"
        )
    return ProviderError("provider_response_invalid", f"The model provider's answer was unusable: {detail}")
