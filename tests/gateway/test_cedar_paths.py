"""The docs' "writes only under /data/out/" Cedar policy through a real ``python -m baton serve``: every
spelling of a path that leaves ``out/`` is refused, and the host shows that no file landed outside it.

The adapter is the test server with a read-write host mount at ``/data``; its ``write`` tool writes what
it is given. ``out/up`` is a symlink to ``..`` (inside the mount) and ``out/away`` one to a host
directory outside the mount. The server receives the canonical path that the policy judged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import unicodedata
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.runtime import Runtime
from baton.testing.gateway_adapter import document, make_live, publish, registry_runtime, tool
from baton.testing.npm_registry import NpmRegistryServer
from tests.conftest import baton_environ, call, stdio_session

from .test_call_policy import doc_example

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap"), pytest.mark.timeout(1800)]

#: The docs' example for a tool called ``write``, and two forbids a non-canonical spelling could pass.
POLICY = doc_example().replace('Action::"write_file"', 'Action::"write"') + (
    '@id("not-the-locked-file")\n'
    'forbid(principal, action == Action::"write", resource)\n'
    '  when { context.arguments.path == "/data/out/locked.txt" };\n'
    '@id("no-cafe")\n'
    'forbid(principal, action == Action::"write", resource)\n'
    '  when { context.arguments.path like "/data/out/caf\u00e9*" };\n'
)

#: Each spelling that must be refused, and the error class that refuses it.
REFUSED = {
    "/data/out/../escape.txt": "gateway_policy_forbidden",  # ``..``
    "/data/out/./.././escape-dot.txt": "gateway_policy_forbidden",  # ``.``
    "/data/out//..//escape-slashes.txt": "gateway_policy_forbidden",  # ``//``
    "/data/out/../escape-trailing.txt/": "gateway_policy_forbidden",  # a trailing slash
    "/data/out/locked.txt/": "gateway_policy_forbidden",  # a trailing slash past an exact forbid
    "/data/out/cafe\u0301.txt": "gateway_policy_forbidden",  # NFD past an NFC forbid
    "/data/out/../../etc/escape.txt": "gateway_policy_forbidden",  # above the mount's root
    "/data/out/up/escape-up.txt": "gateway_policy_forbidden",  # a symlink to ``..`` inside the mount
    "/data/out/away/escape-away.txt": "gateway_policy_forbidden",  # a symlink out of the mount
    "/data/out/nul\x00.txt": "invalid_arguments",  # a control character
    "/data/out/esc\x1b[31m.txt": "invalid_arguments",
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def host() -> Iterator[dict[str, Path]]:
    """The mounted host directory (``out/`` in it, with its two symlinks) and one outside the mount."""
    base = Path(tempfile.mkdtemp(prefix="baton-paths-"))
    tree = {
        "base": base,
        "data": base / "data",
        "out": base / "data" / "out",
        "elsewhere": base / "elsewhere",
    }
    for directory in (tree["data"], tree["out"], tree["elsewhere"]):
        directory.mkdir()
    (tree["out"] / "up").symlink_to("..")
    (tree["out"] / "away").symlink_to(tree["elsewhere"])
    for directory in (base, tree["data"], tree["out"], tree["elsewhere"]):
        directory.chmod(0o755)
        if os.geteuid() == 0:  # the sandbox writes as uid 65534: it could write anywhere in the mount
            os.chown(directory, 65534, 65534)
    yield tree
    shutil.rmtree(base)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, host: dict[str, Path]) -> Iterator[dict[str, str]]:
    """A store with the ``files`` adapter live: ``write`` under the docs' policy, ``/data`` mounted rw."""
    home = tmp_path_factory.mktemp("paths") / "home"
    environment = baton_environ(home)
    with NpmRegistryServer() as registry:
        with registry_runtime(home, registry) as runtime:
            draft = document(
                "files",
                publish(registry),
                [tool("write", path="string", text="string")],
                mounts=[{"host": str(host["data"]), "sandbox": "/data", "mode": "rw"}],
            )
            make_live(
                runtime,
                draft,
                allowed=["write"],
                allow_destructive_without_approval=["write"],
                record_arguments=True,
                call_policy=POLICY,
            )
        yield environment


@pytest.fixture(scope="module")
async def session(env: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(env) as client:
        yield client


def written_paths(env: dict[str, str]) -> list[str]:
    """The ``path`` argument of every ``gateway_call`` receipt, oldest first (what the server was sent)."""
    runtime = Runtime.open(load_settings(env))
    try:
        return [r.payload["arguments"]["path"] for r in runtime.receipts.list(kind="gateway_call")]
    finally:
        runtime.close()


def outside_out(host: dict[str, Path]) -> list[str]:
    """Every file on the host that is neither in ``out/`` nor one of the tree's own directories."""
    own = {host["data"], host["out"], host["elsewhere"]}
    found = []
    for root, directories, files in os.walk(host["base"]):
        for name in directories + files:
            path = Path(root) / name
            if path not in own and host["out"] not in path.parents:
                found.append(str(path.relative_to(host["base"])))
    return found


async def test_every_spelling_that_leaves_out_is_refused_and_nothing_lands_outside_it(
    session: Any, env: dict[str, str], host: dict[str, Path]
) -> None:
    refused = {}
    for path in REFUSED:
        result = await call(session, "files__write", {"path": path, "text": "escaped"})
        refused[path] = result.get("error_class")
        assert result["success"] is False, (path, result)
    assert refused == REFUSED
    assert outside_out(host) == [] and list(host["elsewhere"].iterdir()) == []


async def test_the_server_writes_the_canonical_path_the_policy_permitted(
    session: Any, env: dict[str, str], host: dict[str, Path]
) -> None:
    permitted = {
        "/data/out/./sub/..//report.txt/": "report.txt",
        "/data/out/ne\u0301.txt": unicodedata.normalize("NFC", "ne\u0301.txt"),  # NFD arrives as NFC
        "/data/out/\uff0e\uff0e\uff0fescape.txt": "\uff0e\uff0e\uff0fescape.txt",  # lookalikes are a name
    }
    for path, name in permitted.items():
        result = await call(session, "files__write", {"path": path, "text": "inside"})
        assert result["success"] is True, (path, result)
        assert (host["out"] / name).read_text() == "inside"
    assert not (host["out"] / "ne\u0301.txt").exists()
    sent = written_paths(env)
    assert "/data/out/report.txt" in sent and "/data/out/n\u00e9.txt" in sent
    assert not any("/./" in p or "//" in p or p.endswith("/") or ".." in p for p in sent)
    assert outside_out(host) == []
