"""The state store: the engine, the tables, migrations, leases, paging and wake-ups."""
