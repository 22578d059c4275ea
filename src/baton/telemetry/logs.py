"""Logging to stderr with every record redacted (stdout belongs to the MCP protocol)."""

from __future__ import annotations

import logging
import sys

from baton.evidence.redaction import Redactor


class RedactingFormatter(logging.Formatter):
    """Formats a record, traceback included, then redacts credentials from the text."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The redacted line."""
        return self.redactor.text(super().format(record))


def configure_logging(redactor: Redactor, level: int = logging.INFO) -> None:
    """Send baton's (and the SDK's) logs to stderr through the redacting formatter."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(redactor))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("baton").setLevel(level)
