"""baton's benchmark suite: every figure is a ratio against a reference measured in the same run."""
