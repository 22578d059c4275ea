"""lock fetches exact packages and writes a bundle; the independent verifier recomputes every hash."""

from __future__ import annotations

import ast
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from baton.errors import GatewayError
from baton.gateway import artifacts, stages, state
from baton.gateway.policy import load_policy
from baton.runtime import Runtime
from baton.testing.npm_registry import NpmRegistryServer, build_tarball, integrity_of

from .conftest import TEST_SERVER, install_policy, policy_document, publish_server


def kinds(runtime: Runtime) -> list[str]:
    return [r.kind for r in runtime.receipts.list()]


def failure_of(runtime: Runtime, adapter_id: str) -> dict[str, object]:
    row = state.get_adapter(runtime, adapter_id)
    assert row is not None and row["state"] == "blocked"
    failures = runtime.receipts.list(kind="gateway_failure")
    assert failures, "a failure receipt was written"
    return failures[-1].payload


def test_lock_verify_check_link_policy_bundle_and_receipts(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    install_policy(runtime, policy_document("demo", publish_server(registry)))
    locked = artifacts.lock(runtime, "demo")
    bundle = Path(locked["bundle"])
    assert sorted(p.name for p in bundle.iterdir()) == [
        "bundle-manifest.json",
        "lock-receipt.json",
        "sbom.cdx.json",
        "tarballs",
    ]
    lock_receipt = json.loads((bundle / "lock-receipt.json").read_text())
    sbom = json.loads((bundle / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.5"
    assert lock_receipt["cyclonedx_sbom_sha256"] == locked["cyclonedx_sbom_sha256"]
    assert lock_receipt["packages"][0]["tarball_sha512_hex"] == locked["packages"][f"{TEST_SERVER}@1.0.0"]
    verified = stages.verify(runtime, "demo")
    assert verified["lock_receipt_sha256"] == locked["lock_receipt_sha256"]
    checked = stages.check(runtime, "demo")
    assert checked["status"] == "completed_check_mode_no_runtime_execution"
    assert checked["contract_pinned"] is False
    assert kinds(runtime) == ["gateway_lock", "gateway_verify"]
    assert runtime.receipts.verify().ok
    assert [row["state"] for row in stages.list_view(runtime)] == ["verified"]


def test_lock_from_a_package_spec_resolves_the_closure_once_and_drafts_a_policy(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    core_v1 = build_tarball({"package/package.json": '{"name":"core","version":"1.4.2"}'})
    core_v2 = build_tarball({"package/package.json": '{"name":"core","version":"2.0.0"}'})
    registry.publish("core", "1.4.2", core_v1)
    registry.publish("core", "2.0.0", core_v2)
    top = build_tarball(
        {"package/package.json": '{"name":"@demo/top","version":"0.1.0"}', "package/cli.js": ""}
    )
    registry.publish("@demo/top", "0.1.0", top, dependencies={"core": "^1.2.0"}, bin={"top": "cli.js"})
    locked = artifacts.lock(runtime, "npm:@demo/top@0.1.0", arguments=["--headless"])
    assert locked["adapter_id"] == "demo-top"
    assert set(locked["packages"]) == {"@demo/top@0.1.0", "core@1.4.2"}
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert [(a.name, a.version) for a in policy.artifacts] == [("@demo/top", "0.1.0"), ("core", "1.4.2")]
    assert policy.runtime.entrypoint == ["node", "node_modules/@demo/top/cli.js"]
    assert policy.runtime.arguments == ["--headless"]
    assert policy.contract is None
    with pytest.raises(GatewayError) as again:
        artifacts.lock(runtime, "npm:@demo/top@0.1.0")
    assert again.value.error_class == "adapter_policy_exists"
    assert stages.verify(runtime, "demo-top")["status"] == "completed_verified"


def test_a_registry_whose_tarball_does_not_match_its_integrity_fails_closed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    honest = publish_server(registry)
    install_policy(runtime, policy_document("demo", honest))
    registry.replace_tarball(f"{TEST_SERVER}-1.0.0.tgz", honest + b"tampered")
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "demo")
    assert info.value.error_class == "artifact_integrity_mismatch"
    assert failure_of(runtime, "demo")["error_class"] == "artifact_integrity_mismatch"


def test_a_pin_that_differs_from_the_registry_fails_closed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    publish_server(registry)
    install_policy(runtime, policy_document("demo", b"other bytes"))
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "demo")
    assert info.value.error_class == "artifact_integrity_mismatch"


def test_a_dependency_the_policy_does_not_pin_is_refused(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = build_tarball({"package/package.json": "{}"})
    registry.publish(TEST_SERVER, "1.0.0", tarball, dependencies={"left-pad": "^1"})
    install_policy(runtime, policy_document("demo", tarball))
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "demo")
    assert info.value.error_class == "artifact_dependency_unresolvable"


def test_an_expired_policy_is_refused_with_a_failure_receipt(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    document = policy_document("demo", publish_server(registry))
    document["adapter"]["expires_at"] = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    install_policy(runtime, document, check_expiry=False)
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "demo")
    assert info.value.error_class == "adapter_policy_expired"
    assert failure_of(runtime, "demo")["error_class"] == "adapter_policy_expired"
    assert stages.list_view(runtime)[0]["block_reason"].startswith("lock: ")


@pytest.mark.parametrize(
    ("tamper", "error_class"),
    [
        (
            lambda b: (b / "tarballs" / f"{TEST_SERVER}-1.0.0.tgz").write_bytes(b"evil"),
            "artifact_tarball_checksum_mismatch",
        ),
        (
            lambda b: (b / "bundle-manifest.json").write_text("{}"),
            "artifact_bundle_manifest_checksum_mismatch",
        ),
        (lambda b: (b / "sbom.cdx.json").write_text("{}"), "artifact_bundle_sbom_checksum_mismatch"),
        (lambda b: (b / "lock-receipt.json").write_text("{}"), "artifact_receipt_chain_invalid"),
    ],
)
def test_the_verifier_catches_every_tampered_file(
    runtime: Runtime, registry: NpmRegistryServer, tamper: object, error_class: str
) -> None:
    install_policy(runtime, policy_document("demo", publish_server(registry)))
    bundle = Path(artifacts.lock(runtime, "demo")["bundle"])
    tamper(bundle)  # type: ignore[operator]
    with pytest.raises(GatewayError) as info:
        stages.verify(runtime, "demo")
    assert info.value.error_class == error_class
    assert failure_of(runtime, "demo")["stage"] == "verify"
    verifier = json.loads((bundle / "verifier-receipt.json").read_text())
    assert verifier["error_class"] == error_class


def test_check_refuses_a_bundle_that_was_never_verified(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    install_policy(runtime, policy_document("demo", publish_server(registry)))
    artifacts.lock(runtime, "demo")
    with pytest.raises(GatewayError) as info:
        stages.check(runtime, "demo")
    assert info.value.error_class == "adapter_not_verified"


def test_the_verifier_imports_only_the_standard_library() -> None:
    import baton.gateway.verifier as module

    source = Path(module.__file__ or "").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_the_verifier_canonical_json_is_the_receipts_one() -> None:
    from baton.gateway.verifier import canonical_json as independent
    from baton.receipts import canonical_json

    sample = {"b": [1, "é", {"z": None, "a": 1.5}], "a": True}
    assert independent(sample) == canonical_json(sample)


def test_integrity_strings_are_sha512_sri() -> None:
    assert integrity_of(b"x").startswith("sha512-")
