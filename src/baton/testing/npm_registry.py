"""A loopback package registry (metadata + files on 127.0.0.1) for testing ``baton gateway lock``.

It speaks the parts of the registry APIs that lock uses: npm's ``GET /<name>`` (packument),
``GET /<name>/<version>`` (version manifest) and the tarball URLs those documents name, and PyPI's
``GET /pypi/<name>/<version>/json`` with the wheel URLs and sha256 digests it lists.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from baton.testing.loopback import LoopbackHTTPServer, serve_in_thread


def build_tarball(
    files: dict[str, bytes | str], extra: list[tuple[tarfile.TarInfo, bytes]] | None = None
) -> bytes:
    """A gzipped tar of ``files`` (paths as given, e.g. ``package/index.js``) plus raw extra members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 499162500
            archive.addfile(info, io.BytesIO(data))
        for info, data in extra or []:
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def build_wheel(
    files: dict[str, bytes | str], extra: list[tuple[zipfile.ZipInfo, bytes]] | None = None
) -> bytes:
    """A wheel (zip) of ``files`` plus raw extra members (to build hostile ones)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(path, content)
        for info, data in extra or []:
            archive.writestr(info, data)
    return buffer.getvalue()


def integrity_of(data: bytes) -> str:
    """The ``sha512-<base64>`` integrity string npm publishes."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


class NpmRegistryServer:
    """Serves published packages on 127.0.0.1; use as a context manager."""

    def __init__(self) -> None:
        self.packages: dict[str, dict[str, dict[str, Any]]] = {}
        self.wheels: dict[tuple[str, str], dict[str, Any]] = {}
        self.tarballs: dict[str, bytes] = {}
        self.requests: list[str] = []
        self._server: LoopbackHTTPServer | None = None

    @property
    def url(self) -> str:
        """The registry's base URL."""
        assert self._server is not None, "registry not started"
        return self._server.base_url

    def __enter__(self) -> NpmRegistryServer:
        self._server = serve_in_thread(self._handler(), "npm-registry")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def publish(
        self,
        name: str,
        version: str,
        tarball: bytes,
        *,
        dependencies: dict[str, str] | None = None,
        bin: dict[str, str] | None = None,
        integrity: str | None = None,
    ) -> str:
        """Publish one version; ``integrity`` overrides the honest value (to test a lying registry)."""
        filename = f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
        self.tarballs[filename] = tarball
        self.packages.setdefault(name, {})[version] = {
            "name": name,
            "version": version,
            "dependencies": dependencies or {},
            "bin": bin or {},
            "dist": {
                "tarball": f"{self.url}/-/tarballs/{filename}",
                "integrity": integrity or integrity_of(tarball),
            },
        }
        return filename

    def publish_wheel(
        self, name: str, version: str, filename: str, wheel: bytes, *, sha256: str | None = None
    ) -> None:
        """Publish one wheel; ``sha256`` overrides the honest digest (to test a lying index)."""
        self.tarballs[filename] = wheel
        self.wheels[(name, version)] = {
            "info": {"name": name, "version": version},
            "urls": [
                {
                    "filename": filename,
                    "packagetype": "bdist_wheel",
                    "url": f"{self.url}/-/tarballs/{filename}",
                    "digests": {"sha256": sha256 or hashlib.sha256(wheel).hexdigest()},
                }
            ],
        }

    def replace_tarball(self, filename: str, tarball: bytes) -> None:
        """Serve other bytes under a published tarball URL, leaving the metadata as it was."""
        self.tarballs[filename] = tarball

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry.requests.append(self.path)
                path = unquote(self.path.split("?", 1)[0]).lstrip("/")
                if path.startswith("-/tarballs/") and path[11:] in registry.tarballs:
                    self._send(200, registry.tarballs[path[11:]], "application/octet-stream")
                    return
                document = registry._document(path)
                if document is None:
                    self._send(404, b'{"error":"not found"}', "application/json")
                else:
                    self._send(200, json.dumps(document).encode("utf-8"), "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def _document(self, path: str) -> dict[str, Any] | None:
        parts = path.split("/")
        if len(parts) == 4 and parts[0] == "pypi" and parts[3] == "json":
            return self.wheels.get((parts[1], parts[2]))
        if path in self.packages:
            versions = self.packages[path]
            latest = sorted(versions)[-1]
            return {"name": path, "dist-tags": {"latest": latest}, "versions": versions}
        name, _, version = path.rpartition("/")
        return self.packages.get(name, {}).get(version)
