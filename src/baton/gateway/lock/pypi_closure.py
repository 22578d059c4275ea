"""PyPI's dependency closure of a candidate, resolved by uv and checked by baton.

``uv pip compile --generate-hashes`` for the sandbox interpreter's version and this platform, wheels only;
baton then picks the one wheel per package this interpreter installs, downloads it and checks it against
both the resolver's hashes and the index's published sha256.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin

from baton.errors import GatewayError
from baton.gateway import progress
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.registries import Fetched, Registries
from baton.gateway.sandbox.scratch import directory as scratch_dir

PYPI_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
PYPI_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}$")
UV_TIMEOUT_SECONDS = 300


def uv_binary() -> str:
    """The uv executable shipped by the ``uv`` wheel."""
    try:
        from uv import find_uv_bin
    except ImportError:
        raise GatewayError(
            "artifact_resolver_unavailable", "uv is needed to resolve PyPI candidates."
        ) from None
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        raise GatewayError("artifact_resolver_unavailable", "The uv binary is missing.") from None


def uv_env(scratch: str) -> dict[str, str]:
    """An environment for uv without the host's uv/pip configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))}
    return env | {"UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(Path(scratch) / "cache"), "HOME": scratch}


def _uv_error(stderr: str) -> GatewayError:
    text = stderr.strip()
    tail = " ".join(line.strip() for line in text.splitlines()[-10:])[:600]
    if re.search(
        r"no wheels? (?:with a matching|for)|only has source|has no wheels|no matching distribution|"
        r"only-binary|source distribution",
        text,
        re.IGNORECASE,
    ):
        return GatewayError("artifact_no_wheel_for_platform", f"No wheel installs on this platform: {tail}")
    if (
        re.search(
            r"Failed to fetch|Could not connect|error sending request|connection|HTTP status",
            text,
            re.IGNORECASE,
        )
        and "not found in the package registry" not in text
    ):
        return GatewayError("artifact_registry_error", f"The index could not be read: {tail}")
    if re.search(r"Failed to parse|invalid|Couldn't parse", text, re.IGNORECASE) and "requirement" in text:
        return GatewayError("adapter_candidate_invalid", f"uv refuses the candidate: {tail}")
    if re.search(r"metadata|Failed to read", text, re.IGNORECASE) and "No solution" not in text:
        return GatewayError("artifact_metadata_invalid", f"The index's metadata is invalid: {tail}")
    return GatewayError("artifact_dependency_unresolvable", f"uv cannot resolve the closure: {tail}")


def uv_compile(
    requirement: str, index_url: str, python: str, constraints: list[str] | None = None
) -> dict[str, tuple[str, set[str]]]:
    """``uv pip compile --generate-hashes`` of one requirement under constraints; {name: (version, sha256s)}."""
    with scratch_dir("uv-lock") as scratch:
        argv = [
            uv_binary(), "pip", "compile", "-", "--generate-hashes", "--only-binary", ":all:",
            "--python", python, "--index-url", index_url, "--no-header", "--no-annotate",
            "--quiet", "--no-config", "--color", "never",
        ]  # fmt: skip
        if constraints:
            constraints_file = Path(scratch) / "constraints.txt"
            constraints_file.write_text("\n".join(constraints) + "\n", encoding="utf-8")
            argv += ["--constraint", str(constraints_file)]
        try:
            done = subprocess.run(
                argv,
                input=requirement.encode("utf-8") + b"\n",
                capture_output=True,
                env=uv_env(str(scratch)),
                cwd=scratch,
                timeout=UV_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GatewayError(
                "artifact_registry_error", f"uv did not resolve {requirement} in time."
            ) from None
    if done.returncode != 0:
        raise _uv_error(done.stderr.decode("utf-8", "replace"))
    return parse_compiled(done.stdout.decode("utf-8", "replace"))


def parse_compiled(text: str) -> dict[str, tuple[str, set[str]]]:
    """Pins and hashes from uv's requirements output."""
    pins: dict[str, tuple[str, set[str]]] = {}
    current = None
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)", line)
        if not match:
            raise GatewayError("artifact_metadata_invalid", f"uv wrote an unexpected line {line[:80]!r}.")
        current = canonical_name(match.group(1))
        hashes = set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
        pins[current] = (match.group(2), hashes)
    if not pins or any(not hashes for _, hashes in pins.values()):
        raise GatewayError("artifact_metadata_invalid", "uv returned pins without hashes.")
    return pins


def canonical_name(name: str) -> str:
    """PEP 503 normalized name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def target_tags(python_version: tuple[int, int]) -> list[str]:
    """Wheel tags the sandbox interpreter installs, best first (CPython on this host's platform)."""
    from packaging import tags

    platforms = list(tags.platform_tags())
    interpreter = f"cp{python_version[0]}{python_version[1]}"
    found = [
        *tags.cpython_tags(python_version=python_version, platforms=platforms),
        *tags.compatible_tags(python_version=python_version, interpreter=interpreter, platforms=platforms),
    ]
    return [str(tag) for tag in found]


SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def pick_wheel(
    files: list[Any], version: str, hashes: set[str], ranking: dict[str, int], key: str
) -> dict[str, Any]:
    """The best wheel of ``version`` for the target interpreter among those the resolver hashed.

    ``files`` is the index's PEP 691 file list: its ``hashes.sha256`` is what the index publishes.
    """
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
    except InvalidVersion:
        raise GatewayError(
            "artifact_metadata_invalid", f"uv pinned an invalid version {version!r}."
        ) from None
    best: tuple[int, dict[str, Any]] | None = None
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("hashes"), dict):
            continue
        digest = str(item["hashes"].get("sha256") or "")
        if digest not in hashes or item.get("yanked"):
            continue
        try:
            _, found, _, wheel_tags = parse_wheel_filename(str(item.get("filename") or ""))
        except InvalidWheelFilename:
            continue
        if found != wanted:
            continue
        rank = min((ranking[str(t)] for t in wheel_tags if str(t) in ranking), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, item)
    if best is None:
        raise GatewayError(
            "artifact_no_wheel_for_platform",
            f"No wheel of {key} that the resolver pinned installs on this interpreter and platform.",
            package=key,
        )
    return best[1]


def fetch_wheel(registries: Registries, dist: str, version: str, digest: str, filename: str) -> Fetched:
    """Download one pinned wheel named by the index's simple page and check it against the pin."""
    page_url = f"{registries.pypi_url}/simple/{quote(dist)}/"
    page = registries.json_document(page_url, accept=SIMPLE_JSON)
    files = page.get("files")
    listed = (
        [f for f in files if isinstance(f, dict) and f.get("filename") == filename]
        if isinstance(files, list)
        else []
    )
    published = str((listed[0].get("hashes") or {}).get("sha256") or "") if listed else ""
    if published != digest:
        raise GatewayError(
            "artifact_integrity_mismatch",
            f"The index no longer publishes {filename} with the pinned sha256.",
            package=f"{dist}=={version}",
        )
    url = urljoin(page_url, str(listed[0].get("url")))
    content = registries.checked_download(
        url,
        filename,
        "sha256",
        digest,
        f"The wheel {filename} does not match the sha256 the index publishes.",
        f"{dist}=={version}",
    )
    return Fetched(
        ecosystem="pypi",
        name=dist,
        version=version,
        filename=filename,
        content=content,
        source_url=url,
        registry_integrity=f"sha256:{digest}",
        sha256=digest,
    )


def resolve_pypi(
    registries: Registries,
    name: str,
    version: str | None,
    python: str,
    python_version: tuple[int, int],
    constraints: list[str] | None = None,
) -> Closure:
    """uv resolves the closure; baton picks one wheel per package, downloads and checks it."""
    if not PYPI_NAME.fullmatch(name) or (version is not None and not PYPI_VERSION.fullmatch(version)):
        raise GatewayError(
            "adapter_candidate_invalid", f"{name!r} {version!r} is not a PyPI name and version."
        )
    requirement = f"{name}=={version}" if version else name
    progress.phase(f"resolving {requirement} with uv")
    pins = uv_compile(requirement, f"{registries.pypi_url}/simple", python, constraints)
    ranking = {tag: i for i, tag in enumerate(target_tags(python_version))}
    fetched: list[Fetched] = []
    lines = []
    progress.phase("downloading and checking wheels", len(pins))
    for dist, (pinned, hashes) in sorted(pins.items()):
        key = f"{dist}=={pinned}"
        page = registries.json_document(f"{registries.pypi_url}/simple/{quote(dist)}/", accept=SIMPLE_JSON)
        files = page.get("files")
        wheel = pick_wheel(files if isinstance(files, list) else [], pinned, hashes, ranking, key)
        digest = str(wheel["hashes"]["sha256"])
        fetched.append(fetch_wheel(registries, dist, pinned, digest, str(wheel.get("filename"))))
        progress.advance(len(fetched[-1].content))
        lines.append(f"{dist}=={pinned} --hash=sha256:{digest}")
    root_name = canonical_name(name)
    root = next((f for f in fetched if f.name == root_name), None)
    if root is None:
        raise GatewayError("artifact_metadata_invalid", f"uv's closure does not contain {name}.")
    ordered = [root, *(f for f in fetched if f is not root)]
    return Closure(
        ecosystem="pypi", root=root, fetched=ordered, requirements=("\n".join(lines) + "\n").encode()
    )
