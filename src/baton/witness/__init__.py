"""``baton witness serve``: a tlog-witness that cosigns baton's checkpoints (docs/receipts.md)."""
