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


def _interpreter_words(entrypoint: list[str]) -> list[str]:
    """The entrypoint's interpreter and its flags: everything before the file or module it runs."""
    for index, word in enumerate(entrypoint[1:], start=1):
        if word.startswith(("node_modules/", "site-packages/")) or word in ("-m", "baton_boot.py"):
            return entrypoint[:index]
    return entrypoint[:1]


def shipped_entrypoints(root: Fetched, interpreter: list[str]) -> list[str]:
    """The commands the root package ships, as ``--entrypoint`` values run by ``interpreter``."""
    import shlex

    if root.ecosystem == "npm":
        try:
            files = _tar_files(root.content)
        except (tarfile.TarError, OSError, EOFError):
            return []
        scripts = [s.removeprefix("./").strip() for s in root.bin.values()]
        shown = [f"node_modules/{root.name}/{s}" for s in scripts if s in files and ".." not in s.split("/")]
        command = interpreter if interpreter[0].rsplit("/", 1)[-1] in ("node", "nodejs") else ["node"]
        runs = [[*(["python3"] if s.endswith(".py") else command), s] for s in shown]
    else:
        from baton.gateway.lock.drafting import wheel_targets

        runs = [["python3", "-I", "-S", "baton_boot.py", t] for t in wheel_targets(root)]
    return list(dict.fromkeys(shlex.join(run) for run in runs))


def _given_refusal(root: Fetched, entrypoint: list[str], what: str) -> GatewayError:
    shipped = shipped_entrypoints(root, _interpreter_words(entrypoint))
    offer = "; it ships: " + ", ".join(repr(s) for s in shipped) if shipped else "; it declares no bin"
    return GatewayError(
        "artifact_no_entrypoint",
        f"--entrypoint runs {what}, which no pinned package ships{offer}.",
        package=root.key,
        entrypoints=shipped,
    )


def check_given_entry(root: Fetched, fetched: list[Fetched], entrypoint: list[str]) -> None:
    """Refuse an ``--entrypoint`` whose file or module none of the locked packages ships (before replay)."""
    rest = entrypoint[len(_interpreter_words(entrypoint)) :]
    if not rest:
        return  # no file or module named: the allow-list refuses the shape
    target = rest[0]
    if target.startswith("node_modules/"):
        found = _npm_ships(fetched, target)
    elif target.startswith("site-packages/"):
        found = any(_in_wheel(f, target.removeprefix("site-packages/")) for f in fetched)
    elif target == "-m" and len(rest) > 1:
        path = rest[1].replace(".", "/")
        found = any(_in_wheel(f, f"{path}/__main__.py") or _in_wheel(f, f"{path}.py") for f in fetched)
    else:
        return  # baton's boot: the drafted module:function form is checked by check_runnable_entry
    if not found:
        raise _given_refusal(root, entrypoint, " ".join(rest[:2]) if target == "-m" else target)


def _in_wheel(item: Fetched, name: str) -> bool:
    if item.ecosystem != "pypi":
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(item.content)) as wheel:
            return name in set(wheel.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _npm_ships(fetched: list[Fetched], target: str) -> bool:
    """Whether ``node_modules/NAME[/FILE]`` is a file (or, bare, the main file) of a locked npm package."""
    for item in sorted(fetched, key=lambda f: -len(f.name)):
        prefix = f"node_modules/{item.name}"
        if item.ecosystem != "npm" or not (target == prefix or target.startswith(prefix + "/")):
            continue
        try:
            _npm(item, ["node", target])
        except GatewayError:
            return False
        return True
    return False
