"""``baton gateway lock``: fetch the exact packages, check them, write the bundle and the lock receipt.

The bundle's layout and writing are :mod:`baton.gateway.lock.bundle_writer`'s; what a candidate names and its
resolved closure are :mod:`baton.gateway.lock.candidates`'; drafting a policy for it is :mod:`baton.gateway.lock.drafting`'s.
"""

from __future__ import annotations

import hashlib
import shutil
from contextlib import closing
from dataclasses import replace as replace_fields
from pathlib import Path
from typing import Any, NamedTuple

from baton.errors import GatewayError
from baton.gateway.lock import node_runtime
from baton.gateway.lock.bundle_writer import resolution_contents, swap_bundle, write_bundle
from baton.gateway.lock.candidates import parse_candidate, registries_for, resolve_candidate
from baton.gateway.lock.closure import Closure
from baton.gateway.lock.constraints import normalize as normalize_constraints
from baton.gateway.lock.drafting import default_adapter_id, draft_policy, next_version
from baton.gateway.lock.entry import check_given_entry, check_runnable_entry
from baton.gateway.lock.lock_options import LockOptions, apply_options
from baton.gateway.lock.npm_closure import npm_closure
from baton.gateway.lock.pypi_closure import fetch_wheel
from baton.gateway.lock.registries import Fetched, Registries
from baton.gateway.lock.wheels import check_wheel_sizes, wheel_cap_mb
from baton.gateway.policy import checks, state
from baton.gateway.policy.operator_lock import operator_lock
from baton.gateway.policy.policy import Interpreter, Policy
from baton.gateway.policy.policy_files import load_policy, policy_path, write_policy
from baton.gateway.sandbox import host_programs, interpreter, scratch
from baton.runtime import Runtime
from baton.store.private import private_tree


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


class _Draft(NamedTuple):
    """Where a candidate's drafted policy goes, its narrowed constraints, and the policy it replaces."""

    adapter_id: str
    path: Path
    constraints: list[str]
    previous: Policy | None
    node: str | None = None


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
    node: str | None = None,
    max_wheel_mb: int | None = None,
) -> dict[str, Any]:
    """Lock an adapter (policy id or path), or draft and lock a package spec such as ``npm:NAME@VER``.

    ``constraints`` (drafts only) narrow what the ecosystem's resolver may pick; see
    :mod:`baton.gateway.lock.constraints`. ``replace`` drafts the candidate as the next version of the
    existing policy ``adapter_id`` (see :func:`baton.gateway.lock.drafting.next_version`); a live adapter
    keeps serving meanwhile.
    ``options`` (mounts, environment, entrypoint from the command line) are written into the policy, and
    so is ``max_wheel_mb`` (the per-wheel unpacked size cap, ``resolution.max_wheel_mb``).
    ``node`` (drafts only) bundles a node runtime from the registry; see :mod:`baton.gateway.lock.node_runtime`.
    """
    options = _with_wheel_cap(options, max_wheel_mb)
    scratch.sweep()  # what killed baton processes left in the temp dir (an interrupted npm cache: megabytes)
    from baton.gateway.policy.bookkeeping import fail_closed, identify

    allowed = list(allow_without_install_scripts or [])
    if target.startswith(("npm:", "pypi:")):
        draft = _plan_draft(runtime, target, adapter_id, constraints, replace)
        draft = draft._replace(node=node)
        with operator_lock(runtime, draft.adapter_id):  # outside fail_closed: a busy refusal records nothing
            return fail_closed(
                runtime,
                draft.adapter_id,
                draft.path,
                "lock",
                lambda run_id: _lock_draft(runtime, target, draft, arguments or [], allowed, run_id, options),
            )
    _refuse_constraints(constraints)
    if node is not None:
        raise GatewayError(
            "adapter_candidate_invalid",
            "--node applies when a candidate is drafted: lock npm:NAME --id ID --replace --node VERSION "
            "(an existing policy is locked again exactly as it was pinned).",
        )
    path = policy_path(runtime.settings, target)
    known_id, checksum = identify(path)
    # A live adapter keeps serving its promoted snapshot while this lock (and its verify and replay) run;
    # promoting the result swaps it in (see baton.gateway.policy.snapshot).
    with operator_lock(runtime, known_id):
        return fail_closed(
            runtime,
            known_id,
            path,
            "lock",
            lambda run_id: _lock_policy(runtime, path, run_id, options),
            policy_checksum=checksum,
        )


def _with_wheel_cap(options: LockOptions | None, max_wheel_mb: int | None) -> LockOptions | None:
    """The lock options carrying the wheel cap (the policy records it, so later locks and replays keep it)."""
    if max_wheel_mb is None:
        return options
    return replace_fields(options or LockOptions(), max_wheel_mb=max_wheel_mb)


def _plan_draft(
    runtime: Runtime, target: str, adapter_id: str | None, constraints: list[str] | None, replace: bool
) -> _Draft:
    """Check the candidate spec and its constraints, and where its draft goes, before any lock is taken."""
    ecosystem, name, _ = parse_candidate(target)
    narrowed = normalize_constraints(ecosystem, list(constraints or []))
    adapter_id = adapter_id or default_adapter_id(name)
    path = policy_path(runtime.settings, adapter_id)
    return _Draft(adapter_id, path, narrowed, _replaced_policy(adapter_id, path, replace))


def _replaced_policy(adapter_id: str, path: Path, replace: bool) -> Policy | None:
    """The existing policy ``--replace`` drafts the next version of; without it, none may exist yet."""
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
    return previous


def _refuse_constraints(constraints: list[str] | None) -> None:
    """Constraints steer a resolver; an existing policy is locked again exactly as it was pinned."""
    if constraints:
        raise GatewayError(
            "adapter_candidate_invalid",
            "Constraints apply when a candidate is drafted (lock npm:NAME or pypi:NAME --constraint ...); "
            "a drafted policy is locked again exactly as its resolver's output pinned it.",
        )


def _lock_draft(
    runtime: Runtime,
    target: str,
    draft: _Draft,
    arguments: list[str],
    allow_without_scripts: list[str],
    run_id: str,
    options: LockOptions | None = None,
) -> dict[str, Any]:
    adapter_id, path, constraints, previous, node = draft
    if previous is not None:  # unless given anew, the next version keeps what the owner accepted
        allow_without_scripts = allow_without_scripts or list(
            previous.resolution.allow_without_install_scripts
        )
        constraints = constraints or list(previous.resolution.constraints)
        arguments = arguments or list(previous.runtime.arguments)
    resolved, pin = resolve_candidate(runtime, target, allow_without_scripts, constraints, node)
    policy = draft_policy(adapter_id, target, resolved, arguments, pin, allow_without_scripts, constraints)
    given = options is not None and bool(options.entrypoint)
    if previous is not None:
        policy = next_version(previous, policy)
        if previous.resolution.max_wheel_mb is not None:  # the owner's cap holds for the next version too
            cap = {"max_wheel_mb": previous.resolution.max_wheel_mb}
            policy = policy.model_copy(update={"resolution": policy.resolution.model_copy(update=cap)})
        if not given and _still_runnable(resolved.root, previous.runtime.entrypoint):
            # the owner's entrypoint is kept while the new version still ships what it runs
            policy = policy.model_copy(
                update={
                    "runtime": policy.runtime.model_copy(update={"entrypoint": previous.runtime.entrypoint})
                }
            )
    policy = apply_options(policy, options or LockOptions())
    if given:  # the operator's entrypoint, before a bundled node takes the place of the host's
        check_given_entry(resolved.root, resolved.fetched, policy.runtime.entrypoint)
    entrypoint = node_runtime.entrypoint_for(policy.runtime.entrypoint, pin)
    policy = policy.model_copy(
        update={"runtime": policy.runtime.model_copy(update={"entrypoint": entrypoint})}
    )
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
        resolved = npm_closure(registries, lockfile, root_name, resolution.allow_without_install_scripts)
    else:
        assert resolution.pypi_requirements_sha256 is not None
        requirements = _resolver_file(bundle, "requirements.txt", resolution.pypi_requirements_sha256)
        fetched = [
            fetch_wheel(registries, a.name, a.version, a.sha256 or "", a.filename or "")
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
    if policy.runtime.sandbox != "docker":
        check_given_entry(resolved.root, resolved.fetched, policy.runtime.entrypoint)
    pin = None
    if policy.interpreter is not None and policy.interpreter.bundled:
        pin = node_runtime.bundled_pin(resolved)  # the runtime the pinned closure carries
    elif policy.runtime.sandbox != "docker":
        pin = interpreter.observe(policy.runtime.entrypoint[0])
    if pin is not None and (
        policy.interpreter is None or policy.interpreter.model_dump(exclude_none=True) != pin
    ):
        policy = policy.model_copy(update={"interpreter": Interpreter.model_validate(pin)})
        given = True
    repinned = host_programs.repin(policy)  # locking again accepts the host programs as they are now
    if repinned.host_programs != policy.host_programs:
        policy, given = repinned, True
    return _record_lock(runtime, policy, path, resolved, run_id, write=given)


def _record_lock(
    runtime: Runtime, policy: Policy, path: Path, resolved: Closure, run_id: str, *, write: bool
) -> dict[str, Any]:
    """Stage the bundle, then (only when all of it succeeded) write the policy, swap the bundle, record."""
    check_wheel_sizes(resolved.fetched, wheel_cap_mb(policy))
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    private_tree(bundle.parent, runtime.settings.home)  # BATON_HOME/gateway/<id>: 0700
    pin = policy.interpreter.model_dump(exclude_none=True) if policy.interpreter else None
    resolution = _resolution(resolved, pin)
    receipt = write_bundle(
        bundle, policy.id, resolved.fetched, run_id, policy.artifact_set_sha256(), resolution
    )
    checksum = _install(policy, path, receipt.pop("staging"), bundle, write=write)
    payload = {
        **_lock_payload(run_id, checksum, receipt, resolved, pin),
        "max_wheel_mb": wheel_cap_mb(policy),
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


def _resolution(resolved: Closure, pin: dict[str, Any] | None) -> dict[str, Any]:
    """What the resolver picked, skipped and weakened, as the bundle's lock receipt records it."""
    return {
        "contents": resolution_contents(resolved),
        "skipped_optional": resolved.skipped_optional,
        "without_install_scripts": resolved.without_install_scripts,
        "weak_integrity": resolved.weak_integrity,
        "interpreter": pin,
    }


def _install(policy: Policy, path: Path, staging: Path, bundle: Path, *, write: bool) -> str:
    """Write the policy (or read its checksum back), then swap the staged bundle in; staging never stays."""
    try:
        if write:
            checksum = write_policy(path, policy)
        else:
            _, checksum = load_policy(path)
        swap_bundle(staging, bundle)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return checksum


def _lock_payload(
    run_id: str, checksum: str, receipt: dict[str, Any], resolved: Closure, pin: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``gateway_lock`` receipt's payload: the hashes of what was written and what was pinned."""
    return {
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
