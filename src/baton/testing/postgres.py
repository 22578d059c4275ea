"""A throwaway PostgreSQL server on 127.0.0.1, from the machine's PostgreSQL binaries.

Used by baton's store tests (and usable by yours): ``with TemporaryPostgres() as pg: pg.url``. When run as
root, the server runs as the ``postgres`` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, newest version first."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryPostgres:
    """initdb + pg_ctl start in a temporary directory; stopped and removed on exit."""

    def __init__(self, database: str = "baton") -> None:
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) are not installed")
        self.bin_dir = bin_dir
        self.database = database
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="baton-pg-"))
        self.data = self.root / "data"
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the database (psycopg driver)."""
        return f"postgresql+psycopg://baton@127.0.0.1:{self.port}/{self.database}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> TemporaryPostgres:
        """Create the cluster, start it and create the database."""
        if self._as_postgres:
            os.chmod(self.root, 0o755)  # noqa: S103 - the postgres user must reach its data dir
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "baton", "-A", "trust", "--no-sync", "-E", "UTF8")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "baton", self.database)
        return self

    def stop(self) -> None:
        """Stop the server and delete its files."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (subprocess.SubprocessError, OSError):
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
