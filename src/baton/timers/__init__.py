"""Persistent timers (SPEC.md section 3): one-shot and repeating, fired exactly once per due time."""
