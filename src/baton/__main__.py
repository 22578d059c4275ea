"""``python -m baton`` is the ``baton`` command."""

from baton.cli import main

if __name__ == "__main__":
    main()
