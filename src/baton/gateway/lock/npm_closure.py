"""npm's dependency closure of a candidate: npm's lockfile (see :mod:`baton.gateway.lock.npm_resolve`), checked by baton.

Every package the lockfile installs on this platform is downloaded once and checked against the lockfile's
and the registry's integrity; install scripts, which never run here, are refused unless accepted by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from baton.errors import GatewayError
from baton.gateway import progress
from baton.gateway.lock import npm_resolve
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.constraints import npm_overrides
from baton.gateway.lock.registries import Fetched, Registries, tarball_filename


def _npm_fetch(registries: Registries, entry: npm_resolve.LockEntry) -> tuple[Fetched, str, list[str], bool]:
    """Download one locked tarball and check it; (fetched, strength, declared scripts, registry flag)."""
    if not entry.resolved.startswith(registries.npm_url + "/"):
        raise GatewayError(
            "artifact_metadata_invalid",
            f"The lockfile resolves {entry.key} outside the registry ({entry.resolved}).",
            package=entry.key,
        )
    dist = npm_resolve.registry_dist(registries.packument(entry.name), entry)
    if str(dist.get("tarball") or "") != entry.resolved:
        raise GatewayError(
            "artifact_metadata_invalid",
            f"The registry's tarball URL of {entry.key} differs from the lockfile's.",
            package=entry.key,
        )
    filename = tarball_filename(entry.name, entry.version)
    expected = npm_resolve.sri_digest(entry.integrity, "sha512") or ""
    content = registries.download(entry.resolved, filename, "sha512", expected)
    sha512, strength = npm_resolve.check_tarball(entry, dist, content)
    registries.remember(filename, content)
    fetched = Fetched(
        ecosystem="npm",
        name=entry.name,
        version=entry.version,
        filename=filename,
        content=content,
        source_url=entry.resolved,
        registry_integrity=str(dist.get("integrity") or f"sha1-{dist.get('shasum')}"),
        bin=entry.bin,
    )
    assert fetched.sha512_hex == sha512
    scripts = npm_resolve.declared_install_scripts(content)
    return fetched, strength, scripts, bool(dist.get("hasInstallScript"))


def install_scripts_refused(keys: list[str]) -> GatewayError:
    """One refusal naming every package that declares an install script, and the one flag that accepts them."""
    names = sorted({key.rsplit("@", 1)[0] for key in keys})
    return GatewayError(
        "artifact_install_script_refused",
        f"{len(keys)} package(s) declare an install script, which never runs here: {', '.join(keys)}. "
        "Accept running them without it with one flag: --allow-without-install-scripts "
        f"{','.join(names)} (or resolution.allow_without_install_scripts in the policy).",
        packages=keys,
        accept=",".join(names),
    )


@dataclass
class _NpmDownloads:
    """What the download loop gathers: the checked packages by key, and the lists the closure reports."""

    fetched: dict[str, Fetched] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    weak: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)


def _refuse_declared_install_scripts(entries: list[npm_resolve.LockEntry], allow: list[str]) -> None:
    """npm's resolution already says which packages declare install scripts: refuse before any download."""
    declared = {e.key for e in entries if e.platform_ok and e.has_install_script and e.name not in allow}
    if declared:
        raise install_scripts_refused(sorted(declared))


def _download_npm(
    registries: Registries, entries: list[npm_resolve.LockEntry], allow: list[str]
) -> _NpmDownloads:
    """Fetch and check each package for this platform once; skip optional ones for others; sort out scripts."""
    downloads = _NpmDownloads()
    progress.phase("downloading and checking npm packages", len({e.key for e in entries if e.platform_ok}))
    for entry in entries:
        if not entry.platform_ok:
            if not entry.optional:
                raise GatewayError(
                    "artifact_platform_unsupported",
                    f"{entry.key} does not install on linux/x64 and is not optional.",
                    package=entry.key,
                )
            downloads.skipped.append(entry.path)
            continue
        if entry.key in downloads.fetched:
            continue
        item, strength, scripts, registry_flag = _npm_fetch(registries, entry)
        downloads.fetched[entry.key] = item
        progress.advance(len(item.content))
        if strength != "sha512":
            downloads.weak.append(entry.key)
        if scripts or entry.has_install_script or registry_flag:
            (downloads.accepted if entry.name in allow else downloads.refused).append(entry.key)
    return downloads


def npm_closure(
    registries: Registries, lockfile: bytes, name: str, allow_without_scripts: list[str]
) -> Closure:
    """Fetch and check every package a lockfile installs on this platform."""
    entries = npm_resolve.parse_lockfile(lockfile, name)
    _refuse_declared_install_scripts(entries, allow_without_scripts)
    downloads = _download_npm(registries, entries, allow_without_scripts)
    if downloads.refused:
        raise install_scripts_refused(sorted(downloads.refused))
    root = next(downloads.fetched[e.key] for e in entries if e.path == f"node_modules/{name}")
    ordered = [root, *sorted((f for f in downloads.fetched.values() if f is not root), key=lambda f: f.key)]
    return Closure(
        ecosystem="npm",
        root=root,
        fetched=ordered,
        lockfile=lockfile,
        skipped_optional=sorted(downloads.skipped),
        without_install_scripts=sorted(downloads.accepted),
        weak_integrity=sorted(downloads.weak),
    )


def resolve_npm(
    registries: Registries,
    name: str,
    spec: str,
    allow_without_scripts: list[str],
    constraints: list[str] | None = None,
    extra: dict[str, str] | None = None,
    before_fetch: Callable[[bytes], None] | None = None,
) -> Closure:
    """npm resolves ``name@spec`` (and ``extra``); ``before_fetch`` may refuse its lockfile before any
    download; baton fetches and checks the closure."""
    overrides = npm_overrides(constraints or [])
    progress.phase(f"resolving {name}@{spec} with npm")
    lockfile = npm_resolve.npm_lockfile(name, spec, registries.npm_url, overrides, extra)
    if before_fetch is not None:
        before_fetch(lockfile)
    return npm_closure(registries, lockfile, name, allow_without_scripts)
