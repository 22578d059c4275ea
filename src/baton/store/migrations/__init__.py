"""Alembic migrations of the store, named and ordered; ``baton db upgrade`` applies them."""
