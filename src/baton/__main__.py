"""``python -m baton`` is the ``baton`` command."""

from baton.launcher import main

if __name__ == "__main__":
    main()
