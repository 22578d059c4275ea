"""pydantic-ai, imported lazily and safely: its modules import each other circularly, so two threads
importing them at once can see one half-initialized (``ImportError: ... partially initialized module``).

Every pydantic-ai import in baton happens after :func:`load_pydantic_ai` (or :func:`aload_pydantic_ai`),
or under :data:`IMPORT_LOCK` (a provider's modules, in ``providers.build_model``). ``tests/test_lazy_imports``
checks that each function-level import does.
"""

from __future__ import annotations

import importlib
import threading

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


def load_pydantic_ai() -> None:
    """Import pydantic-ai's core modules once, in one thread at a time (a no-op once imported)."""
    if _IMPORTED.is_set():
        return
    with IMPORT_LOCK:
        for name in _CORE_MODULES:
            importlib.import_module(name)
    _IMPORTED.set()


async def aload_pydantic_ai() -> None:
    """:func:`load_pydantic_ai` from async code: in a worker thread, so the event loop never waits on it."""
    if not _IMPORTED.is_set():
        import anyio

        await anyio.to_thread.run_sync(load_pydantic_ai)
