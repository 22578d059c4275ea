"""The process-wide objects every subsystem shares: settings, store, receipts, redaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from baton.config import Settings, load_settings
from baton.evidence.receipts import ReceiptLog, Redactor
from baton.store.engine import Store
from baton.store.leases import new_instance_id


@dataclass
class Runtime:
    """Settings, the store and the receipt log; subsystems hang their services on ``services``."""

    settings: Settings
    store: Store
    redactor: Redactor
    receipts: ReceiptLog
    instance_id: str = field(default_factory=new_instance_id)
    services: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, settings: Settings | None = None) -> Runtime:
        """Open the store named by ``settings`` (default: the environment)."""
        settings = settings or load_settings()
        store = Store(settings.database_url)
        redactor = Redactor(settings.sensitive_values())
        return cls(settings=settings, store=store, redactor=redactor, receipts=ReceiptLog(store, redactor))

    def close(self) -> None:
        """Release the store's connections."""
        self.store.dispose()
