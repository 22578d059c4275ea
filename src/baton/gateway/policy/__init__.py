"""An adapter's policy, its state in the store, its contract and its per-call Cedar policy."""
