"""Evidence: canonical bytes, the receipt hash chain, redaction and signed checkpoints."""
