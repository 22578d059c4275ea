"""A lock candidate (``npm:NAME[@VERSION|RANGE|TAG]`` or ``pypi:NAME[==VERSION]``): what it names, and the
checked closure its ecosystem's resolver makes of it, with the interpreter that will run it."""

from __future__ import annotations

from contextlib import closing
from functools import partial

from baton.errors import GatewayError
from baton.gateway.lock import node_runtime, npm_resolve
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.npm_closure import resolve_npm
from baton.gateway.lock.pypi_closure import PYPI_NAME, PYPI_VERSION, resolve_pypi
from baton.gateway.lock.registries import Registries
from baton.gateway.sandbox import interpreter
from baton.runtime import Runtime

DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"
DEFAULT_PYPI_URL = "https://pypi.org"


def parse_candidate(candidate: str) -> tuple[str, str, str | None]:
    """``npm:NAME[@VERSION|RANGE|TAG]`` or ``pypi:NAME[==VERSION]`` to (ecosystem, name, spec or None).

    A bare name locks the newest version (npm's ``latest`` tag, PyPI's newest release).
    """
    ecosystem, _, rest = candidate.partition(":")
    rest = rest.strip()
    if ecosystem == "npm" and rest:
        at = rest.rfind("@")
        name, spec = (rest[:at], rest[at + 1 :]) if at > 0 else (rest, "latest")
        npm_resolve.check_spec(name, spec or "latest")
        return "npm", name, spec or "latest"
    if ecosystem == "pypi" and rest:
        name, operator, version = rest.partition("==")
        name, version = name.strip(), version.strip()
        if (operator and not version) or not PYPI_NAME.fullmatch(name):
            raise GatewayError(
                "adapter_candidate_invalid", f"{candidate!r} is not pypi:NAME or pypi:NAME==VERSION."
            )
        if version and not PYPI_VERSION.fullmatch(version):
            raise GatewayError("adapter_candidate_invalid", f"{version!r} is not an exact PyPI version.")
        return "pypi", name, version or None
    raise GatewayError(
        "adapter_candidate_invalid",
        f"{candidate[:200]!r} is not a package spec (npm:NAME[@VERSION|RANGE] or pypi:NAME[==VERSION]).",
    )


def registries_for(runtime: Runtime) -> Registries:
    """Registry clients configured from the settings."""
    settings = runtime.settings
    return Registries(
        settings.baton_npm_registry or DEFAULT_NPM_REGISTRY,
        settings.baton_pypi_url or DEFAULT_PYPI_URL,
        settings.baton_artifact_cache,
    )


def resolve_candidate(
    runtime: Runtime,
    target: str,
    allow_without_scripts: list[str],
    constraints: list[str] | None = None,
    node: str | None = None,
) -> tuple[Closure, dict[str, str] | None]:
    """The candidate's checked closure and the pin of the interpreter that will run it.

    ``node`` (``lock --node``): a node runtime from the registry to bundle, or ``host``; see
    :mod:`baton.gateway.lock.node_runtime`.
    """
    ecosystem, name, spec = parse_candidate(target)
    node_runtime.check_request(node, ecosystem)
    with closing(registries_for(runtime)) as registries:
        if ecosystem == "npm":
            host = None if node_runtime.wanted(node) else interpreter.observe("node")
            resolved = resolve_npm(
                registries, name, spec or "latest", allow_without_scripts, constraints,
                extra=node_runtime.dependencies(node),
                before_fetch=partial(node_runtime.check_engines, name, node, host),
            )  # fmt: skip
            pin = node_runtime.bundled_pin(resolved) if node_runtime.wanted(node) else host
        else:
            pin = interpreter.observe("python3")
            assert pin is not None
            major, minor = pin["version"].split(".")[:2]
            resolved = resolve_pypi(
                registries, name, spec, pin["path"], (int(major), int(minor)), constraints
            )
    return resolved, pin
