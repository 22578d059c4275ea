"""Adapter state in the store, changed in the same transaction as the receipt that justifies it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import bindparam, insert, select, update

from baton.errors import BatonError
from baton.evidence.receipts import Receipt, sha256_hex, utc_now
from baton.runtime import Runtime
from baton.store.prepared import Prepared
from baton.store.schema import gateway_adapters

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


_LIVENESS_PREPARED = Prepared(_LIVENESS)


def liveness(runtime: Runtime, adapter_id: str) -> dict[str, Any] | None:
    """The adapter's served checksum and run-time block, or None when baton has never seen it."""
    with runtime.store.read() as connection:
        row = connection.execute(_LIVENESS, {"adapter_id": adapter_id}).first()
    return dict(row._mapping) if row else None


def liveness_now(runtime: Runtime, adapter_id: str) -> dict[str, Any] | None:
    """:func:`liveness` for a proxied call, on the store's kept autocommit reader where it has one
    (:meth:`~baton.store.engine.Store.quick_reader`): every read still sees what any process committed before it,
    so a demotion by the CLI stops the next call, without a pool checkout or a deferred ``BEGIN``."""
    store = runtime.store
    if not store.quick_reads:
        return liveness(runtime, adapter_id)
    with store.quick_reader() as reader:
        row = _LIVENESS_PREPARED.first(reader, adapter_id=adapter_id)
    if row is None:
        return None
    return {"serving_policy_checksum": row[0], "serving_block_reason": row[1]}


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
