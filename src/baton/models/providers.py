"""Which provider a configuration names, the pydantic-ai model and HTTP client built for it, and how a
provider's failure maps to baton's error classes."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton.config import Settings
from baton.errors import ProviderError
from baton.evidence.receipts import Redactor
from baton.models.pydantic_ai_imports import importing, load_pydantic_ai
from baton.telemetry.tracing import active, http_event_hooks

if TYPE_CHECKING:
    from pydantic_ai.models import Model

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


def build_model(config: ProviderConfig, settings: Settings) -> Model:
    """The pydantic-ai model object for a resolved provider (its modules imported under the import lock)."""
    load_pydantic_ai()
    with importing():
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

        from pydantic_ai.models.openai import OpenAIChatModel

        from baton.models.openai_chat_body import PlainBodyOpenAI

        client_openai = PlainBodyOpenAI(
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
#: part of the client's CPU; 20 keeps a warm pool for ordinary use (docs/benchmarks-history.md,
#: "fanout: what changed, measured").
#: aiohttp's connector (openai's client) takes only the total, from ``max_connections``.
KEEPALIVE_CONNECTIONS = 20
MAX_CONNECTIONS = 1000


def _http_client(sdk: str) -> Any:
    """The provider SDK's own HTTP client, with baton's pool limits and, while tracing is active, the hooks
    that put the trace context on each request.

    openai's client sends over aiohttp (the SDK's ``aiohttp`` extra): the same httpx API and event hooks,
    at less than half the CPU per request under a fan-out (docs/benchmarks-history.md, "p3-cpu: what
    changed, measured").
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


def model_instrumentation() -> Any:
    """pydantic-ai's instrumentation settings while tracing is active (None: no instrumentation)."""
    if not active():
        return None
    load_pydantic_ai()
    from pydantic_ai.models.instrumented import InstrumentationSettings

    return InstrumentationSettings(include_content=False, include_binary_content=False)
