"""The official MCP conformance suite's reference fixtures, served only when an operator turns them on.

``BATON_CONFORMANCE_FIXTURES=1`` (or ``baton serve --conformance-fixtures``) adds the tools, prompts,
resources and completions the suite's scenarios call by name (docs/conformance.md). They run on baton's
own machinery: every call goes through the tool registry (receipts, limits), the MRTR ``requestState``
boundary and the Tasks extension's durable rows; none of them grants an approval. A test profile, so never
beyond loopback: ``serve --http`` refuses a non-loopback bind while they are on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.errors import ConfigError

if TYPE_CHECKING:
    from baton.boundary.toolkit import ToolRegistry
    from baton.config import Settings


def check_fixtures_bind(settings: Settings, host: str) -> None:
    """Refuse to serve the fixtures beyond loopback: they are test tools, not an agent's."""
    from baton.http.addresses import is_loopback

    if settings.baton_conformance_fixtures and not is_loopback(host):
        raise ConfigError(
            "config_invalid",
            f"Refusing to listen on {host} with BATON_CONFORMANCE_FIXTURES on: the conformance fixtures "
            "are served on loopback only.",
            variables=["BATON_CONFORMANCE_FIXTURES"],
        )


def register(registry: ToolRegistry) -> None:
    """Add the fixture tools and the fixture prompts, resources and completions to this registry."""
    from baton.wire.conformance.catalog import FixtureCatalog
    from baton.wire.conformance.tools import FixtureTools
    from baton.wire.resources import add_source

    registry.dynamic.append(FixtureTools())
    add_source(registry.runtime, FixtureCatalog())
