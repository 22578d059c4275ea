"""One operator command at a time on an adapter: each command that writes what a serving change reads holds
the adapter's operator lock (``flock`` on ``BATON_HOME/gateway/<id>/.operator.lock``) while it runs:
``promote`` and ``demote`` from the snapshot or the row they read to the prune of the snapshots nobody
serves, so two of them cannot prune each other's snapshot; ``lock`` from its resolution to its recorded
state, since it rebuilds the bundle (its staging directory, then the swap) that a promote snapshots; and
``replay --apply``, which pins the contract in the policy and records the replay a promote checks. A
second command while the first runs is refused with ``adapter_busy`` before it writes anything, its
failure included (it is not queued: the operator runs it again). Reads (``replay`` without ``--apply``,
``status``) take no lock. The kernel drops the lock with its descriptor, so a command killed midway
leaves nothing held."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from baton.errors import GatewayError
from baton.gateway.policy import state
from baton.runtime import Runtime
from baton.store.private import FILE_MODE, private_tree

LOCK_NAME = ".operator.lock"


@contextmanager
def operator_lock(runtime: Runtime, adapter_id: str) -> Iterator[None]:
    """Hold the adapter's operator lock, or raise ``adapter_busy`` when another command holds it."""
    directory = private_tree(state.adapter_dir(runtime, adapter_id), runtime.settings.home)
    descriptor = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GatewayError(
                "adapter_busy",
                f"Adapter {adapter_id} is being changed by another command (lock, replay --apply, "
                "promote or demote); run this one again once it has finished.",
                adapter_id=adapter_id,
            ) from None
        yield
    finally:
        os.close(descriptor)
