"""Lock: resolve a candidate with its ecosystem's resolver, fetch, check and verify the bundle."""
