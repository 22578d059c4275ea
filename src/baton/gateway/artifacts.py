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
from baton.gateway import state
from baton.gateway.policy import (
    Artifact,
    Identity,
    Policy,
    RuntimeSpec,
    load_policy,
    policy_path,
    write_policy,
)
from baton.gateway.registries import Fetched, Registries
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


def parse_candidate(candidate: str) -> tuple[str, str, str]:
    """``npm:@scope/name@1.2.3`` or ``pypi:name==1.2.3`` to (ecosystem, name, version spec)."""
    ecosystem, _, rest = candidate.partition(":")
    if ecosystem == "npm" and rest:
        at = rest.rfind("@")
        name, spec = (rest[:at], rest[at + 1 :]) if at > 0 else (rest, "latest")
        return "npm", name, spec
    if ecosystem == "pypi" and "==" in rest:
        name, _, version = rest.partition("==")
        return "pypi", name.strip(), version.strip()
    raise GatewayError(
        "adapter_policy_invalid",
        f"{candidate!r} is not a package spec (npm:NAME@VERSION or pypi:NAME==VERSION).",
    )


def resolve_npm_closure(registries: Registries, name: str, spec: str) -> list[Fetched]:
    """The package and its whole dependency closure, as exact versions, in one flat node_modules."""
    import nodesemver

    resolved: dict[str, Fetched] = {}
    queue: list[tuple[str, str, str]] = [(name, spec, "(root)")]
    while queue:
        dep, dep_spec, wanted_by = queue.pop(0)
        if dep in resolved:
            if not nodesemver.satisfies(resolved[dep].version, dep_spec, loose=False):
                raise GatewayError(
                    "artifact_dependency_conflict",
                    f"{wanted_by} needs {dep}@{dep_spec} but {resolved[dep].version} is already in the flat set.",
                    package=dep,
                )
            continue
        if len(resolved) >= MAX_CLOSURE:
            raise GatewayError("artifact_dependency_conflict", f"The closure exceeds {MAX_CLOSURE} packages.")
        fetched = registries.fetch_npm(dep, dep_spec)
        resolved[dep] = fetched
        queue.extend(
            (child, child_spec, fetched.key) for child, child_spec in sorted(fetched.dependencies.items())
        )
    return list(resolved.values())


def fetch_pinned(registries: Registries, policy: Policy) -> list[Fetched]:
    """Fetch exactly the policy's artifacts; every pin and every npm dependency must hold."""
    import nodesemver

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
            if dep not in npm or not nodesemver.satisfies(npm[dep], spec, loose=False):
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
    path.write_bytes(data)
    return sha256_hex(data)


def _lock_receipt(
    adapter_id: str,
    run_id: str,
    artifact_set: str,
    rows: list[dict[str, Any]],
    manifest_sha: str,
    sbom_sha: str,
) -> dict[str, Any]:
    """The lock receipt: the hashes of the tarballs, the manifest and the SBOM."""
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
        "bundle_manifest_sha256": manifest_sha,
        "cyclonedx_sbom_sha256": sbom_sha,
        "replay_allowed": False,
        "promotion_allowed": False,
        **OPERATION_BOUNDARIES,
    }


def write_bundle(
    directory: Path, adapter_id: str, fetched: list[Fetched], run_id: str, artifact_set: str
) -> dict[str, Any]:
    """Write tarballs, manifest, SBOM and lock receipt into ``directory`` (replacing an older bundle)."""
    from baton.gateway.sbom import build_sbom

    staging = directory.with_name(directory.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "tarballs").mkdir(parents=True)
    rows = sorted((package_row(item) for item in fetched), key=lambda r: (r["ecosystem"], r["name"]))
    for item, row in zip(sorted(fetched, key=lambda f: (f.ecosystem, f.name)), rows, strict=True):
        (staging / row["tarball_path"]).write_bytes(item.content)
    manifest = {
        "schema_version": BUNDLE_SCHEMA_VERSION,
        "adapter_id": adapter_id,
        "artifact_set_sha256": artifact_set,
        "package_count": len(rows),
        "packages": rows,
        "operation_boundaries": OPERATION_BOUNDARIES,
    }
    manifest_sha = write_json(staging / "bundle-manifest.json", manifest)
    sbom_text = build_sbom(adapter_id, rows, artifact_set, datetime.now(UTC))
    (staging / "sbom.cdx.json").write_text(sbom_text, encoding="utf-8")
    receipt = _lock_receipt(
        adapter_id, run_id, artifact_set, rows, manifest_sha, sha256_hex(sbom_text.encode("utf-8"))
    )
    receipt_sha = write_json(staging / "lock-receipt.json", receipt)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return {**receipt, "lock_receipt_sha256": receipt_sha}


def draft_policy(adapter_id: str, candidate: str, fetched: list[Fetched], arguments: list[str]) -> Policy:
    """A draft policy: artifacts pinned, runtime locked down, contract still to be observed."""
    root = fetched[0]
    if root.ecosystem == "npm":
        script = next(iter(root.bin.values()), "index.js").removeprefix("./")
        entrypoint = ["node", f"node_modules/{root.name}/{script}"]
    else:
        entrypoint = ["python3", "-m", root.name.replace("-", "_")]
    return Policy(
        adapter=Identity(
            id=adapter_id,
            candidate=candidate,
            risk_class="high",
            owner="unassigned",
            expires_at=(datetime.now(UTC) + timedelta(days=90)).replace(microsecond=0).isoformat(),
        ),
        artifacts=[Artifact.model_validate(row) for row in artifact_rows(fetched)],
        runtime=RuntimeSpec(entrypoint=entrypoint, arguments=arguments),
    )


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
    runtime: Runtime, target: str, *, adapter_id: str | None = None, arguments: list[str] | None = None
) -> dict[str, Any]:
    """Lock an adapter (policy id or path), or draft and lock a package spec such as ``npm:NAME@VER``."""
    from baton.gateway.stages import fail_closed, identify

    if target.startswith(("npm:", "pypi:")):
        _, name, _ = parse_candidate(target)
        adapter_id = adapter_id or default_adapter_id(name)
        path = policy_path(runtime.settings, adapter_id)
        if path.exists():
            raise GatewayError(
                "adapter_policy_exists", f"A policy for {adapter_id} already exists at {path}."
            )
        return fail_closed(
            runtime,
            adapter_id,
            path,
            "lock",
            lambda run_id: _lock_draft(runtime, target, adapter_id, path, arguments or [], run_id),
        )
    path = policy_path(runtime.settings, target)
    known_id, checksum = identify(path)
    return fail_closed(
        runtime,
        known_id,
        path,
        "lock",
        lambda run_id: _lock_policy(runtime, path, run_id),
        policy_checksum=checksum,
    )


def _lock_draft(
    runtime: Runtime, target: str, adapter_id: str, path: Path, arguments: list[str], run_id: str
) -> dict[str, Any]:
    ecosystem, name, spec = parse_candidate(target)
    with closing(registries_for(runtime)) as registries:
        if ecosystem == "npm":
            fetched = resolve_npm_closure(registries, name, spec)
        else:
            fetched = [registries.fetch_pypi(name, spec)]
    policy = draft_policy(adapter_id, target, fetched, arguments)
    checksum = write_policy(path, policy)
    return _record_lock(runtime, policy, path, checksum, fetched, run_id)


def _lock_policy(runtime: Runtime, path: Path, run_id: str) -> dict[str, Any]:
    policy, checksum = load_policy(path)
    with closing(registries_for(runtime)) as registries:
        fetched = fetch_pinned(registries, policy)
    return _record_lock(runtime, policy, path, checksum, fetched, run_id)


def _record_lock(
    runtime: Runtime, policy: Policy, path: Path, checksum: str, fetched: list[Fetched], run_id: str
) -> dict[str, Any]:
    bundle = state.adapter_dir(runtime, policy.id) / "bundle"
    receipt = write_bundle(bundle, policy.id, fetched, run_id, policy.artifact_set_sha256())
    payload = {
        "run_id": run_id,
        "policy_checksum": checksum,
        "artifact_set_sha256": receipt["artifact_set_sha256"],
        "lock_receipt_sha256": receipt["lock_receipt_sha256"],
        "bundle_manifest_sha256": receipt["bundle_manifest_sha256"],
        "cyclonedx_sbom_sha256": receipt["cyclonedx_sbom_sha256"],
        "packages": {f"{p['name']}@{p['version']}": p["tarball_sha512_hex"] for p in receipt["packages"]},
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
