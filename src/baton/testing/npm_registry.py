"""A loopback package registry (metadata + files on 127.0.0.1) for testing ``baton gateway lock``.

It speaks the parts of the registry APIs that lock (and the npm CLI and uv it runs) use: npm's
``GET /<name>`` (packument, full or abbreviated), ``GET /<name>/<version>`` (version manifest) and the
tarball URLs those documents name; PyPI's ``GET /pypi/<name>/<version>/json``, the PEP 691 JSON simple
API ``GET /simple/<name>/`` and PEP 658 ``.metadata`` files. Tests can also serve any raw document
(recorded real ones, malformed ones) or an HTTP error under a path.
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
        self.latest: dict[str, str] = {}
        self.raw: dict[str, bytes] = {}
        self.raw_unless_npm: dict[str, bytes] = {}
        self.errors: dict[str, int] = {}
        self.metadata: dict[str, bytes] = {}
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
        latest: bool = True,
        **fields: Any,
    ) -> str:
        """Publish one version; ``integrity`` overrides the honest value (to test a lying registry).

        ``fields`` go into the version document as they are (``scripts``, ``hasInstallScript``, ``os``,
        ``cpu``, ``optionalDependencies``, ``peerDependencies`` ...); ``latest`` moves the dist-tag.
        """
        filename = f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
        self.tarballs[filename] = tarball
        self.packages.setdefault(name, {})[version] = {
            "name": name,
            "version": version,
            "dependencies": dependencies or {},
            "bin": bin or {},
            **fields,
            "dist": {
                "tarball": f"{self.url}/-/tarballs/{filename}",
                "integrity": integrity or integrity_of(tarball),
            },
        }
        if latest or name not in self.latest:
            self.latest[name] = version
        return filename

    def serve_raw(self, path: str, body: bytes | dict[str, Any]) -> None:
        """Answer ``GET /<path>`` with these bytes (or this JSON) whatever else is published."""
        self.raw[path.lstrip("/")] = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")

    def serve_raw_unless_npm(self, path: str, body: dict[str, Any]) -> None:
        """Answer ``GET /<path>`` with this JSON to every client but npm (whose User-Agent is ``npm/…``),
        which still gets the published document: a registry that tells the resolver one thing and the
        checker another."""
        self.raw_unless_npm[path.lstrip("/")] = json.dumps(body).encode("utf-8")

    def fail(self, path: str, status: int) -> None:
        """Answer ``GET /<path>`` with an HTTP error status."""
        self.errors[path.lstrip("/")] = status

    def publish_wheel(
        self, name: str, version: str, filename: str, wheel: bytes, *, sha256: str | None = None
    ) -> None:
        """Publish one wheel (several per release allowed); ``sha256`` overrides the honest digest."""
        self.tarballs[filename] = wheel
        self.metadata[filename] = _wheel_metadata(wheel, name, version)
        release = self.wheels.setdefault(
            (name, version), {"info": {"name": name, "version": version}, "urls": []}
        )
        release["urls"] = [u for u in release["urls"] if u["filename"] != filename]
        release["urls"].append(
            {
                "filename": filename,
                "packagetype": "bdist_wheel",
                "url": f"{self.url}/-/tarballs/{filename}",
                "digests": {"sha256": sha256 or hashlib.sha256(wheel).hexdigest()},
            }
        )

    def _simple(self, project: str) -> dict[str, Any] | None:
        """The PEP 691 JSON page of a project (names compared PEP 503-normalized)."""
        releases = [(v, r) for (n, v), r in self.wheels.items() if _normalize(n) == _normalize(project)]
        if not releases:
            return None
        files = []
        for _, release in releases:
            for item in release["urls"]:
                metadata = self.metadata[item["filename"]]
                files.append(
                    {
                        "filename": item["filename"],
                        "url": item["url"],
                        "hashes": dict(item["digests"]),
                        "core-metadata": {"sha256": hashlib.sha256(metadata).hexdigest()},
                    }
                )
        return {"meta": {"api-version": "1.1"}, "name": _normalize(project), "files": files}

    def replace_tarball(self, filename: str, tarball: bytes) -> None:
        """Serve other bytes under a published tarball URL, leaving the metadata as it was."""
        self.tarballs[filename] = tarball

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry.requests.append(self.path)
                path = unquote(self.path.split("?", 1)[0]).lstrip("/")
                if path in registry.errors:
                    self._send(registry.errors[path], b'{"error":"injected"}', "application/json")
                    return
                if path in registry.raw:
                    self._send(200, registry.raw[path], "application/json")
                    return
                if path in registry.raw_unless_npm and not self.headers.get("User-Agent", "").startswith(
                    "npm/"
                ):
                    self._send(200, registry.raw_unless_npm[path], "application/json")
                    return
                if path.startswith("-/tarballs/") and path.endswith(".metadata"):
                    metadata = registry.metadata.get(path[11:].removesuffix(".metadata"))
                    if metadata is not None:
                        self._send(200, metadata, "application/octet-stream")
                        return
                if path.startswith("-/tarballs/") and path[11:] in registry.tarballs:
                    self._send(200, registry.tarballs[path[11:]], "application/octet-stream")
                    return
                if path.startswith("simple/"):
                    page = registry._simple(path[7:].strip("/"))
                    if page is not None:
                        body = json.dumps(page).encode("utf-8")
                        self._send(200, body, "application/vnd.pypi.simple.v1+json")
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
            return {"name": path, "dist-tags": {"latest": self.latest[path]}, "versions": versions}
        name, _, version = path.rpartition("/")
        return self.packages.get(name, {}).get(version)


def _normalize(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_metadata(wheel: bytes, name: str, version: str) -> bytes:
    """A wheel's METADATA file (or a minimal one when the bytes are no wheel)."""
    try:
        with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
            for member in archive.namelist():
                if member.endswith(".dist-info/METADATA"):
                    return archive.read(member)
    except zipfile.BadZipFile:
        pass
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()


def build_python_wheel(
    name: str,
    version: str,
    modules: dict[str, str],
    *,
    requires: list[str] | None = None,
    console_scripts: dict[str, str] | None = None,
    tag: str = "py3-none-any",
) -> tuple[str, bytes]:
    """A real, installable wheel: (filename, bytes) with METADATA, WHEEL, entry points and RECORD."""
    dist = f"{_normalize(name).replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {item}\n" for item in requires or []
    )
    files: dict[str, str] = {**modules, f"{info}/METADATA": metadata}
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: baton-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    )
    if console_scripts:
        lines = "".join(f"{key} = {value}\n" for key, value in console_scripts.items())
        files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{lines}"
    record = []
    for path, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(content.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    return f"{dist}-{tag}.whl", build_wheel(dict(files))
