"""Replay: run the verified server once in its sandbox and record its tool contract."""
