"""``baton gateway lock``: fetch the exact packages, check them, write the bundle and the lock receipt.

Bundle layout (``BATON_HOME/gateway/<id>/bundle``)::

    tarballs/<file>          the packages, byte for byte as the registry served them
    bundle-manifest.json     every package with its sha512 and sha256
    sbom.cdx.json            CycloneDX 1.5
    lock-receipt.json        the hashes of all three, the link the verifier and replay check
"""

from __future__ import annotations

import hashlib
import re
import shutil
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from baton.errors import GatewayError
from baton.gateway import checks, closure, interpreter, npm_resolve, state
from baton.gateway.closure import Closure
from baton.gateway.constraints import normalize as normalize_constraints
from baton.gateway.entry import check_runnable_entry
from baton.gateway.lock_options import LockOptions, apply_options
from baton.gateway.policy import (
    Artifact,
    Identity,
    Interpreter,
    Policy,
    Resolution,
    RuntimeSpec,
    load_policy,
    policy_path,
    write_policy,
)
from baton.gateway.registries import Fetched, Registries
from baton.private import private_dir, private_tree, write_private
from baton.receipts import canonical_json, sha256_hex, utc_now
from baton.runtime import Runtime

BUNDLE_SCHEMA_VERSION = "baton_gateway_bundle_v1"
LOCK_RECEIPT_SCHEMA_VERSION = "baton_gateway_lock_receipt_v1"
MAX_CLOSURE = 256
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"
DEFAULT_PYPI_URL = "https://pypi.org"
SAFE_FILENAME = re.compile(r"^[A-Za-z0-9_.+-]{1,255}$")
OPERATION_BOUNDARIES = {
    "mcp_server_started": False,
    "external_tool_call_performed": False,
    "production_write_performed": False,
    "runtime_request_or_response_body_stored": False,
}


def parse_candidate(candidate: str) -> tuple[str, str, str | None]:
    """``npm:NAME[@VERSION|RANGE|TAG]`` or ``pypi:NAME[==VERSION]`` to (ecosystem, name, spec or None).

    A bare name locks the newest version (npm's ``latest`` tag, PyPI's newest release).
    """
    ecosystem, _, rest = candidate.partition(":")
    rest = rest.strip()
    if ecosystem == "npm" and rest:
        at = rest.rfind("@")
        name, spec = (rest[:at], rest[at + 1 :]) if at > 0 else (rest, "latest")
        npm_resolve.check_spec(name, spec or "latest")
        return "npm", name, spec or "latest"
    if ecosystem == "pypi" and rest:
        name, operator, version = rest.partition("==")
        name, version = name.strip(), version.strip()
        if (operator and not version) or not closure.PYPI_NAME.fullmatch(name):
            raise GatewayError(
                "adapter_candidate_invalid", f"{candidate!r} is not pypi:NAME or pypi:NAME==VERSION."
            )
        if version and not closure.PYPI_VERSION.fullmatch(version):
            raise GatewayError("adapter_candidate_invalid", f"{version!r} is not an exact PyPI version.")
        return "pypi", name, version or None
    raise GatewayError(
        "adapter_candidate_invalid",
        f"{candidate[:200]!r} is not a package spec (npm:NAME[@VERSION|RANGE] or pypi:NAME[==VERSION]).",
    )


def _satisfies(version: str, spec: str) -> bool:
    import nodesemver

    try:
        return bool(nodesemver.satisfies(version, spec, loose=False))
    except (ValueError, TypeError):
        return False


def fetch_pinned(registries: Registries, policy: Policy) -> list[Fetched]:
    """Fetch exactly a hand-written (flat) policy's artifacts; every pin and npm dependency must hold."""
    fetched: list[Fetched] = []
    for artifact in policy.artifacts:
        if artifact.ecosystem == "npm":
            item = registries.fetch_npm(artifact.name, artifact.version, pinned_sha512=artifact.sha512)
        else:
            item = registries.fetch_pypi(artifact.name, artifact.version, filename=artifact.filename)
            if item.sha512_hex != artifact.sha512 or item.sha256 != artifact.sha256:
                raise GatewayError(
                    "artifact_integrity_mismatch",
                    f"The wheel of {artifact.key} differs from the policy's pins.",
                    package=artifact.key,
                )
        fetched.append(item)
    npm = {f.name: f.version for f in fetched if f.ecosystem == "npm"}
    for item in fetched:
        for dep, spec in item.dependencies.items():
            if dep not in npm or not _satisfies(npm[dep], spec):
                raise GatewayError(
                    "artifact_dependency_unresolvable",
                    f"{item.key} depends on {dep}@{spec}, which the policy does not pin.",
                    package=item.key,
                )
    return fetched


def package_row(item: Fetched) -> dict[str, Any]:
    """The manifest row of one fetched package."""
    if not SAFE_FILENAME.fullmatch(item.filename):
        raise GatewayError("artifact_fetch_failed", f"The registry named a file {item.filename!r}.")
    return {
        "ecosystem": item.ecosystem,
        "name": item.name,
        "version": item.version,
        "tarball_path": f"tarballs/{item.filename}",
        "tarball_sha512_hex": item.sha512_hex,
        "tarball_sha256_hex": hashlib.sha256(item.content).hexdigest(),
        "size": len(item.content),
        "registry_integrity": item.registry_integrity,
        "source_url": item.source_url,
    }


def artifact_rows(fetched: list[Fetched]) -> list[dict[str, Any]]:
    """The policy's artifact rows for a fetched set."""
    rows = []
    for item in fetched:
        row: dict[str, Any] = {
            "ecosystem": item.ecosystem,
            "name": item.name,
            "version": item.version,
            "sha512": item.sha512_hex,
        }
        if item.ecosystem == "pypi":
            row |= {"sha256": item.sha256, "filename": item.filename}
        rows.append(row)
    return rows


def write_json(path: Path, value: Any) -> str:
    """Write canonical JSON plus a newline; returns the sha256 of the bytes written."""
    data = canonical_json(value).encode("utf-8") + b"\n"
    write_private(path, data)
    return sha256_hex(data)


RESOLUTION_FILES = {"npm": "package-lock.json", "pypi": "requirements.txt"}


def _lock_receipt(
    adapter_id: str,
    run_id: str,
    artifact_set: str,
    rows: list[dict[str, Any]],
    hashes: dict[str, str],
    resolution: dict[str, Any],
) -> dict[str, Any]:
    """The lock receipt: the hashes of the tarballs, the manifest, the SBOM and the resolver's output."""
    return {
        "schema_version": LOCK_RECEIPT_SCHEMA_VERSION,
        "run_id": run_id,
        "adapter_id": adapter_id,
        "status": "completed_locked_pending_independent_verifier",
        "observed_at": utc_now(),
        "artifact_set_sha256": artifact_set,
        "packages": [
            {
                k: r[k]
                for k in (
                    "ecosystem",
                    "name",
                    "version",
                    "tarball_path",
                    "tarball_sha512_hex",
                    "tarball_sha256_hex",
                    "size",
                )
            }
            for r in rows
        ],
        "bundle_manifest_sha256": hashes["manifest"],
        "cyclonedx_sbom_sha256": hashes["sbom"],
        "resolution_files": resolution["files"],
        "interpreter": resolution.get("interpreter"),
        "replay_allowed": False,
        "promotion_allowed": False,
        **OPERATION_BOUNDARIES,
    }


def _key(item: Fetched) -> tuple[str, str, str]:
    return item.ecosystem, item.name, item.version


def write_bundle(
    directory: Path,
    adapter_id: str,
    fetched: list[Fetched],
    run_id: str,
    artifact_set: str,
    resolution: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write tarballs, resolver output, manifest, SBOM and lock receipt into a staging directory.

    The caller swaps it in with :func:`swap_bundle` only once everything else has succeeded, so a
    failed lock leaves the previous bundle as it was.
    """
    from baton.gateway.sbom import build_sbom

    resolution = {"files": {}, **(resolution or {})}
    staging = directory.with_name(directory.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    private_dir(staging)  # 0700, and 0600 files: the bundle is baton's alone (it extracts copies to run)
    private_dir(staging / "tarballs")
    ordered = sorted({_key(f): f for f in fetched}.values(), key=_key)
    rows = [package_row(item) for item in ordered]
    for item, row in zip(ordered, rows, strict=True):
        write_private(staging / row["tarball_path"], item.content)
    files: dict[str, str] = {}
    for name, content in (resolution.pop("contents", None) or {}).items():
        write_private(staging / name, content)
        files[name] = hashlib.sha256(content).hexdigest()
    resolution["files"] = files
    manifest = {
        "schema_version": BUNDLE_SCHEMA_VERSION,
        "adapter_id": adapter_id,
        "artifact_set_sha256": artifact_set,
        "package_count": len(rows),
        "packages": rows,
        "resolution": resolution,
        "operation_boundaries": OPERATION_BOUNDARIES,
    }
    manifest_sha = write_json(staging / "bundle-manifest.json", manifest)
    sbom_text = build_sbom(adapter_id, rows, artifact_set, datetime.now(UTC))
    write_private(staging / "sbom.cdx.json", sbom_text.encode("utf-8"))
    hashes = {"manifest": manifest_sha, "sbom": sha256_hex(sbom_text.encode("utf-8"))}
    receipt = _lock_receipt(adapter_id, run_id, artifact_set, rows, hashes, resolution)
    receipt_sha = write_json(staging / "lock-receipt.json", receipt)
    return {**receipt, "lock_receipt_sha256": receipt_sha, "staging": staging}


def swap_bundle(staging: Path, directory: Path) -> None:
    """Replace the bundle with the staged one (the old one is removed only after the rename)."""
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    staging.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def _wheel_entry(root: Fetched) -> str:
    """``module:function`` of the root wheel's console script (its own name first), else its module."""
    import configparser
    import io
    import zipfile

    module = root.name.replace("-", "_")
    try:
        with zipfile.ZipFile(io.BytesIO(root.content)) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
            text = wheel.read(names[0]).decode("utf-8", "replace") if names else ""
    except (zipfile.BadZipFile, OSError, KeyError):
        return module
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return module
    scripts = dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}
    target = scripts.get(root.name) or next(iter(scripts.values()), module)
    target = target.split("[", 1)[0].strip()
    return target if checks.MODULE_TARGET.fullmatch(target) else module


def _npm_entry(root: Fetched) -> str:
    """The root package's bin (the one named like the package first), else its directory (main)."""
    short = root.name.rsplit("/", 1)[-1]
    script = root.bin.get(short) or next(iter(root.bin.values()), "")
    script = script.removeprefix("./").strip()
    if not script or ".." in script.split("/"):
        return f"node_modules/{root.name}"
    return f"node_modules/{root.name}/{script}"


def draft_policy(
    adapter_id: str,
    candidate: str,
    resolved: Closure,
    arguments: list[str],
    pin: dict[str, str] | None,
    allow_without_scripts: list[str],
    constraints: list[str] | None = None,
) -> Policy:
    """A draft policy: closure pinned, interpreter pinned, runtime locked down, contract still to observe."""
    root = resolved.root
    if root.ecosystem == "npm":
        entrypoint = ["node", _npm_entry(root)]
    else:
        entrypoint = ["python3", "-I", "-S", "baton_boot.py", _wheel_entry(root)]
    files = _resolution_contents(resolved)
    return Policy(
        adapter=Identity(
            id=adapter_id,
            candidate=candidate,
            risk_class="high",
            owner="unassigned",
            expires_at=(datetime.now(UTC) + timedelta(days=90)).replace(microsecond=0).isoformat(),
        ),
        artifacts=[Artifact.model_validate(row) for row in artifact_rows(resolved.fetched)],
        runtime=RuntimeSpec(entrypoint=entrypoint, arguments=arguments),
        resolution=Resolution(
            allow_without_install_scripts=sorted(set(allow_without_scripts)),
            constraints=list(constraints or []),
            npm_lockfile_sha256=_sha(files.get("package-lock.json")),
            pypi_requirements_sha256=_sha(files.get("requirements.txt")),
            skipped_optional=resolved.skipped_optional,
        ),
        interpreter=Interpreter.model_validate(pin) if pin else None,
    )


def _sha(content: bytes | None) -> str | None:
    return hashlib.sha256(content).hexdigest() if content is not None else None


def _resolution_contents(resolved: Closure) -> dict[str, bytes]:
    contents = {}
    if resolved.lockfile is not None:
        contents["package-lock.json"] = resolved.lockfile
    if resolved.requirements is not None:
        contents["requirements.txt"] = resolved.requirements
    return contents


def default_adapter_id(name: str) -> str:
    """``@playwright/mcp`` to ``playwright-mcp``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64] or "adapter"


def registries_for(runtime: Runtime) -> Registries:
    """Registry clients configured from the settings."""
    settings = runtime.settings
    return Registries(
        settings.baton_npm_registry or DEFAULT_NPM_REGISTRY,
        settings.baton_pypi_url or DEFAULT_PYPI_URL,
        settings.baton_artifact_cache,
    )


def lock(
    runtime: Runtime,
    target: str,
    *,
    adapter_id: str | None = None,
    arguments: list[str] | None = None,
    allow_without_install_scripts: list[str] | None = None,
    constraints: list[str] | None = None,
    replace: bool = False,
    options: LockOptions | None = None,
) -> dict[str, Any]:
    """Lock an adapter (policy id or path), or draft and lock a package spec such as ``npm:NAME@VER``.

    ``constraints`` (drafts only) narrow what the ecosystem's resolver may pick; see
    :mod:`baton.gateway.constraints`. ``replace`` drafts the candidate as the next version of the
    existing policy ``adapter_id`` (see :func:`next_version`); a live adapter keeps serving meanwhile.
    ``options`` (mounts, environment, entrypoint from the command line) are written into the policy.
    """
    from baton.gateway.stages import fail_closed, identify

    allowed = list(allow_without_install_scripts or [])
    if target.startswith(("npm:", "pypi:")):
        ecosystem, name, _ = parse_candidate(target)
        narrowed = normalize_constraints(ecosystem, list(constraints or []))
        adapter_id = adapter_id or default_adapter_id(name)
        path = policy_path(runtime.settings, adapter_id)
        previous = None
        if path.exists() and not replace:
            raise GatewayError(
                "adapter_policy_exists",
                f"A policy for {adapter_id} already exists at {path}. Draft this candidate as its next "
                f"version with --replace (the live version keeps serving until the new one is promoted), "
                "or choose another --id.",
            )
        if replace:
            if not path.exists():
                raise GatewayError(
                    "adapter_not_found", f"--replace needs an existing policy for {adapter_id} at {path}."
                )
            previous, _ = load_policy(path, check_expiry=False)
        return fail_closed(
            runtime,
            adapter_id,
            path,
            "lock",
            lambda run_id: _lock_draft(
                runtime,
                target,
                adapter_id,
                path,
                arguments or [],
                allowed,
                narrowed,
                run_id,
                previous,
                options,
            ),
        )
    if constraints:
        raise GatewayError(
            "adapter_candidate_invalid",
            "Constraints apply when a candidate is drafted (lock npm:NAME or pypi:NAME --constraint ...); "
            "a drafted policy is locked again exactly as its resolver's output pinned it.",
        )
    path = policy_path(runtime.settings, target)
    known_id, checksum = identify(path)
    # A live adapter keeps serving its promoted snapshot while this lock (and its verify and replay) run;
    # promoting the result swaps it in (see baton.gateway.promotion).
    return fail_closed(
        runtime,
        known_id,
        path,
        "lock",
        lambda run_id: _lock_policy(runtime, path, run_id, options),
        policy_checksum=checksum,
    )


def resolve_candidate(
    runtime: Runtime, target: str, allow_without_scripts: list[str], constraints: list[str] | None = None
) -> tuple[Closure, dict[str, str] | None]:
    """The candidate's checked closure and the pin of the interpreter that will run it."""
    ecosystem, name, spec = parse_candidate(target)
    with closing(registries_for(runtime)) as registries:
        if ecosystem == "npm":
            resolved = closure.resolve_npm(
                registries, name, spec or "latest", allow_without_scripts, constraints
            )
            pin = interpreter.observe("node")
        else:
            pin = interpreter.observe("python3")
            assert pin is not None
            major, minor = pin["version"].split(".")[:2]
            resolved = closure.resolve_pypi(
                registries, name, spec, pin["path"], (int(major), int(minor)), constraints
            )
    return resolved, pin


def _lock_draft(
    runtime: Runtime,
    target: str,
    adapter_id: str,
    path: Path,
    arguments: list[str],
    allow_without_scripts: list[str],
    constraints: list[str],
    run_id: str,
    previous: Policy | None = None,
    options: LockOptions | None = None,
) -> dict[str, Any]:
    if previous is not None:  # unless given anew, the next version keeps what the owner accepted
        allow_without_scripts = allow_without_scripts or list(
            previous.resolution.allow_without_install_scripts
        )
        constraints = constraints or list(previous.resolution.constraints)
        arguments = arguments or list(previous.runtime.arguments)
    resolved, pin = resolve_candidate(runtime, target, allow_without_scripts, constraints)
    policy = draft_policy(adapter_id, target, resolved, arguments, pin, allow_without_scripts, constraints)
    given = options is not None and bool(options.entrypoint)
    if previous is not None:
        policy = next_version(previous, policy)
        if not given and _still_runnable(resolved.root, previous.runtime.entrypoint):
            # the owner's entrypoint is kept while the new version still ships what it runs
            policy = policy.model_copy(
                update={
                    "runtime": policy.runtime.model_copy(update={"entrypoint": previous.runtime.entrypoint})
                }
            )
    policy = apply_options(policy, options or LockOptions())
    if not given:
        check_runnable_entry(resolved.root, policy.runtime.entrypoint)
    command = policy.runtime.entrypoint[0]
    if policy.runtime.sandbox != "docker" and (
        policy.interpreter is None or policy.interpreter.command != command
    ):
        seen = interpreter.observe(command)  # the interpreter the entrypoint names is the one pinned
        policy = policy.model_copy(
            update={"interpreter": Interpreter.model_validate(seen) if seen is not None else None}
        )
    checks.check_entrypoint(policy)
    checks.check_arguments(policy)
    return _record_lock(runtime, policy, path, resolved, run_id, write=True)


def _still_runnable(root: Fetched, entrypoint: list[str]) -> bool:
    try:
        check_runnable_entry(root, entrypoint)
    except GatewayError:
        return False
    return True


def next_version(previous: Policy, drafted: Policy) -> Policy:
    """The drafted candidate as the next version of ``previous``: its owner, runtime settings (mounts,
    env, network, limits), client and tool choices are kept; artifacts, entrypoint, resolution and
    interpreter are the new draft's, and the contract is unpinned until a replay records it."""
    runtime = previous.runtime.model_copy(
        update={"entrypoint": drafted.runtime.entrypoint, "arguments": drafted.runtime.arguments}
    )
    adapter = previous.adapter.model_copy(update={"candidate": drafted.adapter.candidate})
    return drafted.model_copy(
        update={
            "adapter": adapter,
            "runtime": runtime,
            "client": previous.client,
            "tools": previous.tools.model_copy(update={"denied": []}),
            "contract": None,
        }
    )


def _relock_closure(runtime: Runtime, registries: Registries, policy: Policy) -> Closure:
    """Fetch a drafted policy's closure again, exactly as its resolver output pinned it."""
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    resolution = policy.resolution
    if resolution.npm_lockfile_sha256:
        lockfile = _resolver_file(bundle, "package-lock.json", resolution.npm_lockfile_sha256)
        root = next(a for a in policy.artifacts if a.ecosystem == "npm")
        root_name = (
            parse_candidate(policy.adapter.candidate)[1]
            if policy.adapter.candidate.startswith("npm:")
            else root.name
        )
        resolved = closure.npm_closure(
            registries, lockfile, root_name, resolution.allow_without_install_scripts
        )
    else:
        assert resolution.pypi_requirements_sha256 is not None
        requirements = _resolver_file(bundle, "requirements.txt", resolution.pypi_requirements_sha256)
        fetched = [
            closure.fetch_wheel(registries, a.name, a.version, a.sha256 or "", a.filename or "")
            for a in policy.artifacts
            if a.ecosystem == "pypi"
        ]
        resolved = Closure(ecosystem="pypi", root=fetched[0], fetched=fetched, requirements=requirements)
    pinned = {(a.ecosystem, a.name, a.version, a.sha512) for a in policy.artifacts}
    found = {(f.ecosystem, f.name, f.version, f.sha512_hex) for f in resolved.fetched}
    if pinned != found:
        raise GatewayError(
            "artifact_integrity_mismatch",
            "The registry now serves a closure that differs from the policy's pins.",
            differing=sorted(f"{n}@{v}" for _, n, v, _ in pinned ^ found)[:20],
        )
    return resolved


def _resolver_file(bundle: Path, name: str, expected: str) -> bytes:
    try:
        content = (bundle / name).read_bytes()
    except OSError:
        raise GatewayError(
            "artifact_bundle_invalid",
            f"{name} is missing from the bundle; lock the candidate again under a new id.",
        ) from None
    if hashlib.sha256(content).hexdigest() != expected:
        raise GatewayError("artifact_receipt_chain_invalid", f"{name} differs from the policy's pin.")
    return content


def _lock_policy(
    runtime: Runtime, path: Path, run_id: str, options: LockOptions | None = None
) -> dict[str, Any]:
    policy, _ = load_policy(path)
    given = options is not None and not options.empty()
    if options is not None:
        policy = apply_options(policy, options)
    checks.check_entrypoint(policy)
    checks.check_arguments(policy)
    with closing(registries_for(runtime)) as registries:
        if policy.resolution.npm_lockfile_sha256 or policy.resolution.pypi_requirements_sha256:
            resolved = _relock_closure(runtime, registries, policy)
        else:
            fetched = fetch_pinned(registries, policy)
            resolved = Closure(ecosystem=fetched[0].ecosystem, root=fetched[0], fetched=fetched)
    pin = None
    if policy.runtime.sandbox != "docker":
        pin = interpreter.observe(policy.runtime.entrypoint[0])
    if pin is not None and (policy.interpreter is None or policy.interpreter.model_dump() != pin):
        policy = policy.model_copy(update={"interpreter": Interpreter.model_validate(pin)})
        return _record_lock(runtime, policy, path, resolved, run_id, write=True)
    return _record_lock(runtime, policy, path, resolved, run_id, write=given)


def _record_lock(
    runtime: Runtime, policy: Policy, path: Path, resolved: Closure, run_id: str, *, write: bool
) -> dict[str, Any]:
    """Stage the bundle, then (only when all of it succeeded) write the policy, swap the bundle, record."""
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    private_tree(bundle.parent, runtime.settings.home)  # BATON_HOME/gateway/<id>: 0700
    pin = policy.interpreter.model_dump() if policy.interpreter else None
    resolution = {
        "contents": _resolution_contents(resolved),
        "skipped_optional": resolved.skipped_optional,
        "without_install_scripts": resolved.without_install_scripts,
        "weak_integrity": resolved.weak_integrity,
        "interpreter": pin,
    }
    receipt = write_bundle(
        bundle, policy.id, resolved.fetched, run_id, policy.artifact_set_sha256(), resolution
    )
    staging = receipt.pop("staging")
    try:
        if write:
            checksum = write_policy(path, policy)
        else:
            _, checksum = load_policy(path)
        swap_bundle(staging, bundle)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    payload = {
        "run_id": run_id,
        "policy_checksum": checksum,
        "artifact_set_sha256": receipt["artifact_set_sha256"],
        "lock_receipt_sha256": receipt["lock_receipt_sha256"],
        "bundle_manifest_sha256": receipt["bundle_manifest_sha256"],
        "cyclonedx_sbom_sha256": receipt["cyclonedx_sbom_sha256"],
        "packages": {f"{p['name']}@{p['version']}": p["tarball_sha512_hex"] for p in receipt["packages"]},
        "resolution_files": receipt["resolution_files"],
        "skipped_optional": resolved.skipped_optional,
        "without_install_scripts": resolved.without_install_scripts,
        "weak_integrity": resolved.weak_integrity,
        "interpreter": pin,
    }
    stored = state.record(
        runtime,
        policy.id,
        state="locked",
        kind="gateway_lock",
        payload=payload,
        policy_path=path,
        policy_checksum=checksum,
        artifact_set_sha256=receipt["artifact_set_sha256"],
        lock_receipt_sha256=receipt["lock_receipt_sha256"],
        verify_receipt_sha256=None,
        replay_receipt_sha256=None,
    )
    return {
        **payload,
        "adapter_id": policy.id,
        "policy_path": str(path),
        "bundle": str(bundle),
        "receipt_seq": stored.seq,
    }
