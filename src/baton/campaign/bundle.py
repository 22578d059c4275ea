"""Writing the evidence bundle: redacted JSON files, the manifest and ``latest.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.errors import CampaignError
from baton.evidence.receipts import CREDENTIAL_PATTERN, sha256_hex
from baton.store.private import private_tree, write_private


class BundleWriter:
    """Writes every file of one campaign, redacting credential values and refusing credential shapes."""

    def __init__(self, run_dir: Path, sensitive_values: tuple[str, ...]) -> None:
        self.run_dir = run_dir
        self.sensitive_values = tuple(sorted((v for v in sensitive_values if v), key=len, reverse=True))

    def redact(self, value: Any) -> Any:
        """Replace every configured credential value with ``[REDACTED]``, recursively."""
        if isinstance(value, dict):
            return {key: self.redact(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.redact(item) for item in value]
        if isinstance(value, str):
            for secret in self.sensitive_values:
                if value == secret or (len(secret) >= 8 and secret in value):
                    value = value.replace(secret, "[REDACTED]")
            return value
        return value

    def write_json(self, relative: str, value: Any, *, root: Path | None = None) -> Path:
        """Write redacted, indented JSON; a credential-shaped value anywhere refuses the write."""
        path = (root or self.run_dir) / relative
        text = json.dumps(self.redact(value), ensure_ascii=False, indent=2, default=str) + "\n"
        if CREDENTIAL_PATTERN.search(text):
            raise CampaignError(
                "campaign_bundle_invalid", f"Refused to write {relative}: credential-shaped value."
            )
        private_tree(path.parent, (root or self.run_dir).parent)
        write_private(path, text.encode("utf-8"))
        return path

    def write_manifest(self, header: dict[str, Any]) -> Path:
        """``manifest.json``: every other file's path, bytes and sha256."""
        files = [
            {
                "path": path.relative_to(self.run_dir).as_posix(),
                "bytes": path.stat().st_size,
                "sha256": sha256_hex(path.read_bytes()),
            }
            for path in sorted(self.run_dir.rglob("*"))
            if path.is_file() and path.name != "manifest.json"
        ]
        return self.write_json("manifest.json", {**header, "files": files})

    def write_latest(self, header: dict[str, Any], manifest: Path, base: Path) -> Path:
        """``validation/latest.json`` pointing at this campaign's manifest."""
        try:
            shown = manifest.relative_to(base).as_posix()
        except ValueError:
            shown = str(manifest)
        latest = {**header, "manifest": shown, "manifest_sha256": sha256_hex(manifest.read_bytes())}
        return self.write_json("latest.json", latest, root=self.run_dir.parent)
