"""Adapter state in the store, changed in the same transaction as the receipt that justifies it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import bindparam, insert, select, update

from baton.errors import BatonError
from baton.receipts import Receipt, sha256_hex, utc_now
from baton.runtime import Runtime
from baton.schema import gateway_adapters

State = Literal["drafted", "locked", "verified", "replayed", "promoted", "blocked"]
STATES: tuple[str, ...] = ("drafted", "locked", "verified", "replayed", "promoted", "blocked")


def is_live(row: dict[str, Any]) -> bool:
    """A promoted snapshot is served (also when blocked at run time: its tools answer the block's class)."""
    return row.get("serving_policy_checksum") is not None


def stage_is_served_version(row: dict[str, Any]) -> bool:
    """Whether a live row's ``state`` describes its served version, not a next version on its way."""
    return row["state"] == "promoted" or (
        row["state"] == "blocked" and row.get("block_reason") == row.get("serving_block_reason")
    )


def served_contract(row: dict[str, Any]) -> Any:
    """The contract of the version served (or, when none is, of the last replay)."""
    return row.get("serving_contract") or row.get("contract")


def adapter_dir(runtime: Runtime, adapter_id: str) -> Path:
    """``BATON_HOME/gateway/<id>``: the bundle and the receipt files of one adapter."""
    return runtime.settings.home / "gateway" / adapter_id


def get_adapter(runtime: Runtime, adapter_id: str) -> dict[str, Any] | None:
    """The adapter's row, or None when baton has never seen it."""
    with runtime.store.read() as connection:
        row = connection.execute(select(gateway_adapters).where(gateway_adapters.c.id == adapter_id)).first()
    return dict(row._mapping) if row else None


#: What a proxied call checks on every call (built once: building a statement cost more than running it).
_LIVENESS = select(gateway_adapters.c.serving_policy_checksum, gateway_adapters.c.serving_block_reason).where(
    gateway_adapters.c.id == bindparam("adapter_id")
)


def liveness(runtime: Runtime, adapter_id: str) -> dict[str, Any] | None:
    """The adapter's served checksum and run-time block, or None when baton has never seen it."""
    with runtime.store.read() as connection:
        row = connection.execute(_LIVENESS, {"adapter_id": adapter_id}).first()
    return dict(row._mapping) if row else None


class LivenessReader:
    """The per-call liveness read, on SQLite one prepared statement on a kept driver connection.

    The read is a single ``SELECT`` outside any transaction (the store's connections are in autocommit),
    so every read sees what any process committed before it: a demotion by the CLI stops the next call.
    What the pool checkout, the deferred ``BEGIN`` and SQLAlchemy's execution cost per call is gone; other
    databases (and an in-memory SQLite store, whose pool keeps no connection) read through :func:`liveness`.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._kept: Any = None
        self._lock = threading.Lock()
        self._sql: str | None = None

    def read(self, adapter_id: str) -> dict[str, Any] | None:
        """The adapter's served checksum and run-time block, or None when baton has never seen it."""
        from sqlalchemy.pool import NullPool

        store = self.runtime.store
        if not store.is_sqlite or isinstance(store.engine.pool, NullPool):
            return liveness(self.runtime, adapter_id)
        with self._lock:
            if self._kept is None:
                self._kept = store.engine.raw_connection()
                self._sql = str(_LIVENESS.compile(dialect=store.engine.dialect))
            try:
                rows = self._kept.driver_connection.execute(self._sql, (adapter_id,)).fetchall()
            except BaseException:
                self._drop()
                raise
        if not rows:
            return None
        checksum, block_reason = rows[0]
        return {"serving_policy_checksum": checksum, "serving_block_reason": block_reason}

    def close(self) -> None:
        """Give the kept connection back (the proxy's shutdown)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()


def list_adapters(runtime: Runtime) -> list[dict[str, Any]]:
    """Every adapter row, by id."""
    with runtime.store.read() as connection:
        rows = connection.execute(select(gateway_adapters).order_by(gateway_adapters.c.id)).all()
    return [dict(row._mapping) for row in rows]


def record(
    runtime: Runtime,
    adapter_id: str,
    *,
    state: State,
    kind: str,
    payload: dict[str, Any],
    policy_path: Path,
    **columns: Any,
) -> Receipt:
    """Append a gateway receipt and move the adapter to ``state`` in one transaction."""
    values: dict[str, Any] = {
        "state": state,
        "policy_path": str(policy_path),
        "updated_at": utc_now(),
        "block_reason": None,
        "error_class": None,
        **columns,
    }
    with runtime.store.write() as connection:
        receipt = runtime.receipts.append_in(connection, kind, {"adapter_id": adapter_id, **payload})
        exists = connection.execute(
            select(gateway_adapters.c.id).where(gateway_adapters.c.id == adapter_id)
        ).first()
        if exists:
            connection.execute(
                update(gateway_adapters).where(gateway_adapters.c.id == adapter_id).values(values)
            )
        else:
            connection.execute(insert(gateway_adapters).values(id=adapter_id, **values))
    return receipt


def record_failure(
    runtime: Runtime,
    adapter_id: str,
    *,
    stage: str,
    error: BatonError,
    policy_path: Path,
    receipt: dict[str, Any],
) -> Receipt:
    """Block the adapter with the failure's class and reason and append a gateway_failure receipt."""
    return record(
        runtime,
        adapter_id,
        state="blocked",
        kind="gateway_failure",
        payload={"stage": stage, **receipt},
        policy_path=policy_path,
        block_reason=f"{stage}: {error.message}",
        error_class=error.error_class,
    )


def replay_receipt(runtime: Runtime, adapter_id: str, sha256: str) -> dict[str, Any] | None:
    """The replay receipt file whose bytes hash to ``sha256``, or None."""
    directory = adapter_dir(runtime, adapter_id) / "receipts"
    for file in sorted(directory.glob("replay-*.json")) if directory.is_dir() else []:
        data = file.read_bytes()
        if sha256_hex(data) == sha256:
            value: dict[str, Any] = json.loads(data)
            return value
    return None
