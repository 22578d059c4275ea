"""What a promoted adapter serves: a snapshot of its policy file and bundle, apart from the working ones.

Promotion snapshots the policy file and the bundle (``gateway/<id>/serving/<checksum>/``) and records
the snapshot in the row's ``serving_*`` columns. Serving reads only the snapshot, so a re-lock, verify
and replay of the adapter's next version (which move ``state`` and rewrite the working policy and
bundle) leave the live version serving until the next version is promoted, which swaps in one store
transaction.
"""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import utc_now
from baton.gateway.policy import state
from baton.gateway.policy.policy import Policy
from baton.gateway.policy.policy_files import load_policy, read_policy_document
from baton.gateway.policy.state import is_live
from baton.runtime import Runtime
from baton.store.private import FILE_MODE, private_tree


def serving_columns(checksum: str | None, replay_receipt: str | None, contract: Any) -> dict[str, Any]:
    """The row's ``serving_*`` columns for a version promoted now (all None: nothing served)."""
    return {
        "serving_policy_checksum": checksum,
        "serving_replay_receipt_sha256": replay_receipt,
        "serving_contract": contract,
        "serving_block_reason": None,
        "serving_error_class": None,
        "serving_since": utc_now() if checksum else None,
    }


def serving_root(runtime: Runtime, adapter_id: str, checksum: str) -> Path:
    """``gateway/<id>/serving/<hex>``: the snapshot of the version promoted under ``checksum``."""
    return state.adapter_dir(runtime, adapter_id) / "serving" / checksum.removeprefix("sha256:")


def _link_or_copy(bundle: Path, source: str, destination: str) -> None:
    """Hard-link the bundle's (never rewritten) ``tarballs/``, its packages; copy the rest, the receipts
    among them, which verify rewrites. Only the path inside the bundle decides: a ``tarballs`` folder
    above it (in ``BATON_HOME``'s own path) does not."""
    if Path(source).relative_to(bundle).parts[0] == "tarballs":
        try:
            os.link(source, destination)
            return
        except OSError:
            pass
    shutil.copy2(source, destination)


def snapshot(runtime: Runtime, adapter_id: str, path: Path, checksum: str) -> Path:
    """Copy the policy file and the bundle (hard links where possible) into the serving snapshot.

    Written aside and renamed into place, so a snapshot directory is always whole. Tarballs are never
    modified in place (a lock writes a new bundle and swaps directories), so linking them is safe.
    """
    root = serving_root(runtime, adapter_id, checksum)
    if (root / "policy.toml").is_file():
        return root
    staging = root.parent / f".staging-{uuid.uuid4().hex}"
    try:
        private_tree(staging, runtime.settings.home)
        shutil.copyfile(path, staging / "policy.toml")
        os.chmod(staging / "policy.toml", FILE_MODE)
        if read_policy_document(staging / "policy.toml")[1] != checksum:
            raise GatewayError(
                "adapter_promotion_refused",
                f"Adapter {adapter_id} cannot be promoted: "
                "the policy file changed while it was being promoted.",
                adapter_id=adapter_id,
            )
        bundle = state.adapter_dir(runtime, adapter_id) / "bundle"
        shutil.copytree(bundle, staging / "bundle", copy_function=functools.partial(_link_or_copy, bundle))
        from baton.gateway.policy.cedar_policy import SNAPSHOT_NAME, policy_file, read_pinned

        pinned = load_policy(staging / "policy.toml", check_expiry=False)[0].tools.call_policy_sha256
        text = read_pinned(policy_file(path), pinned)
        if text is not None:
            (staging / SNAPSHOT_NAME).write_text(text, encoding="utf-8")
        if root.exists():
            shutil.rmtree(root)
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def prune_snapshots(runtime: Runtime, adapter_id: str, keep: str | None) -> None:
    """Remove every serving snapshot but ``keep``'s (after the store has stopped pointing at them)."""
    directory = state.adapter_dir(runtime, adapter_id) / "serving"
    kept = keep.removeprefix("sha256:") if keep else None
    for item in directory.iterdir() if directory.is_dir() else []:
        if item.name != kept:
            shutil.rmtree(item, ignore_errors=True)


def serving_files(runtime: Runtime, row: dict[str, Any]) -> tuple[Path, Path]:
    """The policy file and bundle a live row serves: its snapshot, or for an adapter promoted before
    snapshots existed, the working policy and bundle (served only while their checksum still matches)."""
    root = serving_root(runtime, row["id"], row["serving_policy_checksum"] or "")
    if (root / "policy.toml").is_file():
        return root / "policy.toml", root / "bundle"
    return Path(row["policy_path"]), state.adapter_dir(runtime, row["id"]) / "bundle"


@dataclass(frozen=True)
class LiveAdapter:
    """A live adapter as the proxy serves it: its policy as promoted, its row and its bundle snapshot."""

    policy: Policy
    row: dict[str, Any]
    bundle: Path


def serving_problem(runtime: Runtime, row: dict[str, Any]) -> str | None:
    """Why a live row is not served (its snapshot's policy no longer loads, or is not the promoted one)."""
    try:
        load_live(runtime, row)
    except GatewayError as exc:
        return f"{exc.error_class}: {exc.message}"
    return None


def load_live(runtime: Runtime, row: dict[str, Any]) -> LiveAdapter:
    """The live adapter a row serves, from its snapshot; its checksum must be the promoted one."""
    path, bundle = serving_files(runtime, row)
    policy, checksum = load_policy(path)
    if checksum != row.get("serving_policy_checksum"):
        raise GatewayError(
            "adapter_not_promoted",
            "the policy changed after the promotion; replay and promote it again",
            adapter_id=row["id"],
        )
    _archive(runtime, path, policy)
    return LiveAdapter(policy, row, bundle)


def _archive(runtime: Runtime, path: Path, policy: Policy) -> None:
    """Keep the served version's policy document and Cedar policy, content-addressed, for replay."""
    from baton.evidence.canonical import canonical_json
    from baton.evidence.policy_archive import keep
    from baton.gateway.policy.cedar_policy import SNAPSHOT_NAME, policy_file

    keep(runtime.settings, canonical_json(read_policy_document(path)[0]).encode("utf-8"), "json")
    cedar = path.parent / SNAPSHOT_NAME if path.name == "policy.toml" else policy_file(path)
    if policy.tools.call_policy_sha256 is not None and cedar.is_file():
        keep(runtime.settings, cedar.read_bytes(), "cedar")


def live_adapters(runtime: Runtime) -> list[LiveAdapter]:
    """Every live adapter whose snapshot still loads as promoted (others: see :func:`serving_problem`)."""
    result = []
    for row in state.list_adapters(runtime):
        if is_live(row):
            try:
                result.append(load_live(runtime, row))
            except GatewayError:
                continue
    return result
