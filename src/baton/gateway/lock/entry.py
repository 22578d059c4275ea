"""A drafted entrypoint must name something the root package really ships (``artifact_no_entrypoint``)."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile

from baton.errors import GatewayError
from baton.gateway.lock.registries import Fetched


def _refuse(root: Fetched, reason: str) -> GatewayError:
    return GatewayError(
        "artifact_no_entrypoint",
        f"{root.key} has no runnable entrypoint: {reason}. Name one with --entrypoint "
        "(e.g. --entrypoint 'node node_modules/NAME/cli.js'), or lock the package that ships the server.",
        package=root.key,
    )


def _tar_files(content: bytes) -> dict[str, tarfile.TarInfo]:
    """Member paths below the tarball's root directory (``package/x.js`` → ``x.js``)."""
    files: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(fileobj=io.BytesIO(content), mode="r:*") as archive:
        for member in archive.getmembers():
            if member.isfile() and "/" in member.name:
                files[member.name.split("/", 1)[1]] = member
    return files


def _npm(root: Fetched, entrypoint: list[str]) -> None:
    prefix = f"node_modules/{root.name}"
    target = next((w for w in entrypoint[1:] if w == prefix or w.startswith(prefix + "/")), None)
    if target is None:
        return  # the entrypoint runs something else (a module flag, baton's boot): checked elsewhere
    try:
        files = _tar_files(root.content)
    except (tarfile.TarError, OSError, EOFError):
        raise _refuse(root, "its tarball cannot be read") from None
    relative = target.removeprefix(prefix).lstrip("/")
    if relative:
        if relative not in files:
            raise _refuse(root, f"its bin {relative} is not in the package")
        return
    main = "index.js"
    if "package.json" in files:
        with tarfile.open(fileobj=io.BytesIO(root.content), mode="r:*") as archive:
            extracted = archive.extractfile(files["package.json"])
            try:
                manifest = json.loads(extracted.read()) if extracted else {}
            except ValueError:
                manifest = {}
        if isinstance(manifest, dict) and isinstance(manifest.get("main"), str):
            main = manifest["main"].removeprefix("./")
    candidates = {main, f"{main}.js", f"{main}/index.js"}
    if not candidates & set(files):
        raise _refuse(root, "it declares no bin and has no main file")


def _pypi(root: Fetched, entrypoint: list[str]) -> None:
    target = entrypoint[-1]
    module, _, _ = target.partition(":")
    path = module.replace(".", "/")
    try:
        with zipfile.ZipFile(io.BytesIO(root.content)) as wheel:
            names = set(wheel.namelist())
    except (zipfile.BadZipFile, OSError):
        raise _refuse(root, "its wheel cannot be read") from None
    if ":" in target:
        found = {f"{path}.py", f"{path}/__init__.py"} & names or any(
            n.startswith(f"{path}.") and n.endswith(".so") for n in names
        )
    else:
        found = f"{path}/__main__.py" in names
    if not found:
        raise _refuse(root, f"it has no console script and {module} is not a runnable module")


def check_runnable_entry(root: Fetched, entrypoint: list[str]) -> None:
    """Refuse a drafted entrypoint whose file or module the root package does not ship."""
    if root.ecosystem == "npm":
        _npm(root, entrypoint)
    else:
        _pypi(root, entrypoint)
