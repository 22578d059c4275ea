"""Running a witness: its key and state in its home, its HTTP interface on one socket."""

from __future__ import annotations

import sys
from pathlib import Path

from baton.errors import ConfigError
from baton.witness_verify import parse_vkey


def run(home: Path, name: str, log_keys: list[str], bind: str) -> None:
    """Serve the witness on ``bind`` until stopped; one stderr line says where and with which public key."""
    import uvicorn

    from baton.config import load_settings
    from baton.http.limits import uvicorn_config
    from baton.http.listening import listening_socket
    from baton.witness.core import Witness
    from baton.witness.http import build_app

    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or not name or " " in name or "+" in name:
        raise ConfigError(
            "config_invalid", "baton witness serve needs --bind HOST:PORT and a --name without spaces or +."
        )
    try:
        keys = [parse_vkey(text) for text in log_keys]
    except ValueError as exc:
        raise ConfigError("config_invalid", f"A --log-key is malformed ({exc}).") from None
    witness = Witness(home, name, keys)
    sock = listening_socket(host, int(port))
    sock.listen(128)  # connections queue from here on: the line below means ready (port 0: any free one)
    where = f"http://{host}:{sock.getsockname()[1]}"
    sys.stderr.write(f"witness {name} listening on {where}; verifier key {witness.vkey.encode()}\n")
    sys.stderr.flush()
    config = uvicorn_config(build_app(witness), host, int(port), load_settings(), lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
