"""The sandbox a server runs in, and the host programs (interpreter, helpers) pinned for it."""
