"""The price of a model call, from genai-prices' maintained price table.

A call is priced by the provider and model that baton asked for, not by the endpoint that served it:
``OPENAI_BASE_URL`` may point at a proxy in front of a known provider, and the proxy bills what the
provider bills. Decisions where the table cannot know (docs/operations.md):

- ``ollama`` runs on the operator's own hardware: ``cost_usd`` is ``0.0``.
- ``openai-compatible`` is priced by the model name alone when genai-prices knows that name (a LiteLLM
  or vLLM endpoint serving ``gpt-4o-mini`` costs what its provider lists); otherwise ``cost_usd`` is
  null with ``cost_reason``.
- a model the table does not know is null with ``cost_reason``; it still counts in token budgets.

genai-prices loads its table on first use (about a second), so it is imported lazily and warmed in a
worker thread after start.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

#: baton's provider names as genai-prices spells them (None: match by the model name alone).
GENAI_PROVIDER_IDS: dict[str, str | None] = {
    "moonshot": "moonshotai",
    "openai": "openai",
    "anthropic": "anthropic",
    "openrouter": "openrouter",
    "openai-compatible": None,
}

#: Providers that run on the operator's hardware and bill nothing per token.
LOCAL_PROVIDERS = frozenset({"ollama"})


@dataclass(frozen=True)
class Price:
    """The cost of one call in US dollars (None when unknown), where the price came from, and why not."""

    cost_usd: float | None
    price_source: str
    reason: str | None = None

    def receipt_fields(self) -> dict[str, Any]:
        """The fields a ``model_call`` receipt carries (``cost_reason`` only for an unpriced call)."""
        fields: dict[str, Any] = {"cost_usd": self.cost_usd, "price_source": self.price_source}
        if self.reason is not None:
            fields["cost_reason"] = self.reason
        return fields


@cache
def price_source() -> str:
    """``genai-prices <version>``: the table every price comes from."""
    from importlib.metadata import version

    return f"genai-prices {version('genai-prices')}"


def warm() -> None:
    """Load the price table now (it takes about a second), so the first model call does not pay for it."""
    from genai_prices import Usage

    price_call("openai", "gpt-4o-mini", Usage(input_tokens=1, output_tokens=1))


def price_call(provider: str, model: str, usage: Any, served_model: str | None = None) -> Price:
    """Price ``usage`` (a pydantic-ai ``RequestUsage`` or anything genai-prices' ``AbstractUsage`` fits).

    ``model`` is the model asked for; ``served_model`` (the name in the answer, often a dated variant)
    is tried when the table does not know the asked-for name.
    """
    if provider in LOCAL_PROVIDERS:
        return Price(0.0, f"{provider}: local model, no per-token price")
    if provider not in GENAI_PROVIDER_IDS:
        return Price(None, price_source(), f"provider {provider!r} has no entry in the price table")
    from genai_prices import calc_price

    provider_id = GENAI_PROVIDER_IDS[provider]
    names = [model] + ([served_model] if served_model and served_model != model else [])
    for name in names:
        try:
            calculation = calc_price(usage, name, provider_id=provider_id)
        except LookupError:
            continue
        source = price_source()
        if provider_id is None:
            source += f" (matched by model name: {calculation.provider.id})"
        return Price(round(float(calculation.total_price), 10), source)
    where = f"provider {provider_id}" if provider_id else "any provider (openai-compatible endpoint)"
    return Price(None, price_source(), f"model {model!r} is not in the price table for {where}")
