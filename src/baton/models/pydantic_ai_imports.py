"""pydantic-ai, imported lazily and safely: its modules import each other circularly, so two threads
importing them at once can see one half-initialized (``ImportError: ... partially initialized module``).

Every pydantic-ai import in baton happens after :func:`load_pydantic_ai` (or :func:`aload_pydantic_ai`),
or under :data:`IMPORT_LOCK` (a provider's modules, in ``providers.build_model``, through :func:`importing`,
which also pauses the collector). ``tests/test_lazy_imports`` checks that each function-level import does.
"""

from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: pydantic-ai's modules import each other circularly: two threads importing any of them at once (the
#: warm-up's worker building a provider, the event loop starting a turn) can see one half-initialized and
#: fail with ImportError. So every pydantic-ai module baton uses is imported under this one lock: the core
#: set below by :func:`load_pydantic_ai`, a provider's modules by :func:`build_model`.
IMPORT_LOCK = threading.RLock()
_IMPORTED = threading.Event()

#: The pydantic-ai modules baton imports outside a provider (function-level imports find them loaded).
_CORE_MODULES = (
    "pydantic_ai",
    "pydantic_ai.direct",
    "pydantic_ai.exceptions",
    "pydantic_ai.messages",
    "pydantic_ai.models",
    "pydantic_ai.models.instrumented",
    "pydantic_ai.models.wrapper",
    "pydantic_ai.settings",
    "pydantic_ai.tools",
    "pydantic_ai.toolsets",
    "pydantic_ai.toolsets.abstract",
    "pydantic_ai.usage",
)


@contextmanager
def importing() -> Iterator[None]:
    """:data:`IMPORT_LOCK` held, and the collector paused while the model stack is imported.

    The imports make about 180,000 long-lived objects and next to no garbage, yet the collector walked
    them again and again: a fifth of the stack's import CPU, on the first spawn's path when it comes before
    the warm-up is done (docs/benchmarks.md, "first model call"). What they made is then frozen out of
    later collections, as ``baton serve`` does with its start-up heap (baton.wire.heap); a collector already
    off (start-up) is left to whoever turned it off.
    """
    with IMPORT_LOCK:
        if not gc.isenabled():
            yield
            return
        gc.disable()
        try:
            yield
        finally:
            gc.freeze()
            gc.enable()


def load_pydantic_ai() -> None:
    """Import pydantic-ai's core modules once, in one thread at a time (a no-op once imported)."""
    if _IMPORTED.is_set():
        return
    with importing():
        for name in _CORE_MODULES:
            importlib.import_module(name)
    _IMPORTED.set()


async def aload_pydantic_ai() -> None:
    """:func:`load_pydantic_ai` from async code: in a worker thread, so the event loop never waits on it."""
    if not _IMPORTED.is_set():
        import anyio

        await anyio.to_thread.run_sync(load_pydantic_ai)
