"""lock fetches exact packages and writes a bundle; the independent verifier recomputes every hash."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from baton.errors import GatewayError
from baton.gateway.lock import artifacts, stages
from baton.gateway.policy import bookkeeping, state
from baton.gateway.policy.policy_files import load_policy
from baton.runtime import Runtime
from baton.testing.npm_registry import NpmRegistryServer, build_tarball, build_wheel, integrity_of
from tests.cli_process import run_gateway

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
    assert kinds(runtime) == ["gateway_lock", "gateway_verify", "gateway_check"]
    assert runtime.receipts.verify().ok
    assert [row["state"] for row in bookkeeping.list_view(runtime)] == ["verified"]


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


def test_a_tampered_download_cache_is_never_trusted(registry: NpmRegistryServer, tmp_path: Path) -> None:
    # BATON_ARTIFACT_CACHE is shared across locks: a file changed in it is fetched again, never used
    from baton.config import load_settings

    cache = tmp_path / "cache"
    settings = {"BATON_HOME": str(tmp_path / "home"), "BATON_NPM_REGISTRY": registry.url}
    runtime = Runtime.open(load_settings({**settings, "BATON_ARTIFACT_CACHE": str(cache)}))
    try:
        honest = publish_server(registry)
        install_policy(runtime, policy_document("demo", honest))
        artifacts.lock(runtime, "demo")
        (cached,) = cache.glob(f"{TEST_SERVER}*")
        cached.write_bytes(honest + b"tampered")
        downloads = len([r for r in registry.requests if "/-/tarballs/" in r])
        locked = artifacts.lock(runtime, "demo")
    finally:
        runtime.close()
    (bundled,) = (Path(locked["bundle"]) / "tarballs").iterdir()
    assert bundled.read_bytes() == honest
    assert len([r for r in registry.requests if "/-/tarballs/" in r]) == downloads + 1


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
    assert bookkeeping.list_view(runtime)[0]["block_reason"].startswith("lock: ")


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
    import baton.gateway.lock.verifier as module

    source = Path(module.__file__ or "").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_the_verifier_canonical_json_is_the_receipts_one() -> None:
    from baton.evidence.receipts import canonical_json
    from baton.gateway.lock.verifier import canonical_json as independent

    sample = {"b": [1, "é", {"z": None, "a": 1.5}], "a": True}
    assert independent(sample) == canonical_json(sample)


def test_integrity_strings_are_sha512_sri() -> None:
    assert integrity_of(b"x").startswith("sha512-")


def pypi_runtime(runtime: Runtime, registry: NpmRegistryServer) -> Runtime:
    from baton.config import load_settings

    settings = load_settings(
        {
            "BATON_HOME": str(runtime.settings.home),
            "BATON_NPM_REGISTRY": registry.url,
            "BATON_PYPI_URL": registry.url,
        }
    )
    return Runtime.open(settings)


def test_a_pypi_wheel_is_locked_by_its_published_sha256_and_verified(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    wheel = build_wheel({"tiny_mcp/__init__.py": "", "tiny_mcp/__main__.py": ""})
    registry.publish_wheel("tiny-mcp", "0.1.0", "tiny_mcp-0.1.0-py3-none-any.whl", wheel)
    registry.publish_wheel("not-a-wheel", "0.1.0", "not_a_wheel-0.1.0-py3-none-any.whl", b"PK\x03\x04 no zip")
    pypi = pypi_runtime(runtime, registry)
    try:
        with pytest.raises(GatewayError) as nothing:  # a wheel that cannot be read runs nothing
            artifacts.lock(pypi, "pypi:not-a-wheel==0.1.0")
        assert nothing.value.error_class == "artifact_no_entrypoint"
        locked = artifacts.lock(pypi, "pypi:tiny-mcp==0.1.0")
        policy, _ = load_policy(Path(locked["policy_path"]))
        assert policy.artifacts[0].filename == "tiny_mcp-0.1.0-py3-none-any.whl"
        assert policy.artifacts[0].sha256 == hashlib.sha256(wheel).hexdigest()
        assert stages.verify(pypi, "tiny-mcp")["status"] == "completed_verified"
        assert artifacts.lock(pypi, "tiny-mcp")["lock_receipt_sha256"]
    finally:
        pypi.close()


def test_a_wheel_that_does_not_match_the_published_sha256_is_refused(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    registry.publish_wheel("tiny-mcp", "0.1.0", "tiny_mcp-0.1.0-py3-none-any.whl", b"wheel", sha256="0" * 64)
    pypi = pypi_runtime(runtime, registry)
    try:
        with pytest.raises(GatewayError) as info:
            artifacts.lock(pypi, "pypi:tiny-mcp==0.1.0")
        assert info.value.error_class == "artifact_integrity_mismatch"
    finally:
        pypi.close()


def test_a_relock_refuses_a_wheel_the_index_no_longer_publishes_with_the_pinned_sha256(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    # the bytes still match the policy's pin (and the verified cache holds them): only the comparison of
    # the index's published sha256 with the pin sees that the index now names another wheel
    wheel = build_wheel({"tiny_mcp/__init__.py": "", "tiny_mcp/__main__.py": ""})
    filename = "tiny_mcp-0.1.0-py3-none-any.whl"
    registry.publish_wheel("tiny-mcp", "0.1.0", filename, wheel)
    pypi = pypi_runtime(runtime, registry)
    try:
        locked = artifacts.lock(pypi, "pypi:tiny-mcp==0.1.0")
        registry.publish_wheel("tiny-mcp", "0.1.0", filename, wheel, sha256="0" * 64)
        with pytest.raises(GatewayError) as info:
            artifacts.lock(pypi, locked["adapter_id"])
        assert info.value.error_class == "artifact_integrity_mismatch"
        assert "no longer publishes" in info.value.message
    finally:
        pypi.close()


def test_the_verifier_runs_alone_from_the_command_line(runtime: Runtime, registry: NpmRegistryServer) -> None:
    policy = install_policy(runtime, policy_document("demo", publish_server(registry)))
    locked = artifacts.lock(runtime, "demo")
    command = [sys.executable, "-m", "baton.gateway.lock.verifier", locked["bundle"], "--policy", str(policy)]
    command += ["--lock-receipt-sha256", locked["lock_receipt_sha256"]]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin:/bin"}
    passed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert passed.returncode == 0 and json.loads(passed.stdout)["status"] == "completed_verified"
    (Path(locked["bundle"]) / "sbom.cdx.json").write_text("{}")
    failed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error_class"] == "artifact_bundle_sbom_checksum_mismatch"


def test_the_cli_fails_closed_and_list_shows_the_block_reason(
    registry: NpmRegistryServer, baton_env: dict[str, str]
) -> None:
    honest = publish_server(registry)
    registry.replace_tarball(f"{TEST_SERVER}-1.0.0.tgz", honest + b"tampered")
    env = {**baton_env, "BATON_NPM_REGISTRY": registry.url}

    def baton(*args: str) -> subprocess.CompletedProcess[str]:
        return run_gateway(env, *args)

    failed = baton("lock", f"npm:{TEST_SERVER}@1.0.0")
    assert failed.returncode == 1 and "artifact_integrity_mismatch" in failed.stderr
    listed = json.loads(baton("list", "--json").stdout)
    assert [(r["adapter_id"], r["state"], r["error_class"]) for r in listed] == [
        ("baton-test-mcp", "blocked", "artifact_integrity_mismatch")
    ]
    assert listed[0]["block_reason"].startswith("lock: ")
    assert "blocked" in baton("list").stdout


def test_an_allowed_and_denied_tool_blocks_every_stage_with_a_failure_receipt(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    import tomli_w

    document = policy_document("demo", publish_server(registry))
    document["tools"]["denied"].append("echo")
    path = runtime.settings.home / "adapters" / "demo.toml"
    path.parent.mkdir(parents=True)
    path.write_text(tomli_w.dumps(document))
    for stage in (artifacts.lock, stages.verify, stages.check):
        with pytest.raises(GatewayError) as info:
            stage(runtime, "demo")
        assert info.value.error_class == "adapter_tool_overlap"
    assert [r.payload["stage"] for r in runtime.receipts.list(kind="gateway_failure")] == [
        "lock",
        "verify",
        "check",
    ]
    assert failure_of(runtime, "demo")["error_class"] == "adapter_tool_overlap"


def snapshot_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def test_the_standalone_verifier_writes_nothing_unless_asked_and_never_a_traceback(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    import os
    import shutil
    import tempfile

    policy = install_policy(runtime, policy_document("demo", publish_server(registry)))
    locked = artifacts.lock(runtime, "demo")
    stages.verify(runtime, "demo")
    bundle = Path(locked["bundle"])
    before = snapshot_of(bundle)
    command = [sys.executable, "-m", "baton.gateway.lock.verifier", str(bundle), "--policy", str(policy)]
    command += ["--lock-receipt-sha256", locked["lock_receipt_sha256"]]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin:/bin"}
    passed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert passed.returncode == 0 and json.loads(passed.stdout)["status"] == "completed_verified"
    assert snapshot_of(bundle) == before, "the bundle is untouched"
    stages.check(runtime, "demo")  # the store's verifier receipt still links up

    # a read-only copy, verified by a user who cannot write it
    base = Path(tempfile.mkdtemp(prefix="baton-ro-bundle-"))
    try:
        shutil.copytree(bundle, base / "bundle")
        shutil.copy(policy, base / "policy.toml")
        for path in [base, *base.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        ro = [
            sys.executable,
            "-m",
            "baton.gateway.lock.verifier",
            str(base / "bundle"),
            "--policy",
            str(base / "policy.toml"),
        ]
        if os.geteuid() == 0:
            ro = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *ro]
        result = subprocess.run(ro, capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["status"] == "completed_verified"
        target = base / "bundle" / "verifier-receipt.json"
        asked = subprocess.run(
            [*ro, "--write-receipt", str(target)], capture_output=True, text=True, env=env, check=False
        )
        assert asked.returncode == 2 and "Traceback" not in asked.stderr
        assert asked.stderr.startswith("verifier_receipt_not_written:")
        out = Path(tempfile.mkdtemp(prefix="baton-receipt-")) / "receipt.json"
        written = subprocess.run(
            [*command, "--write-receipt", str(out)], capture_output=True, text=True, env=env, check=False
        )
        assert written.returncode == 0 and out.read_text() == written.stdout
        shutil.rmtree(out.parent)
    finally:
        for path in [base, *base.rglob("*")]:
            path.chmod(0o755)
        shutil.rmtree(base)


def test_the_stdlib_verifier_reads_the_schema_and_resolver_files_the_lock_writes() -> None:
    """verifier.py imports nothing of baton's: the schema versions are its own, which the bundle writer
    imports, and the resolver file names it accepts must be the ones lock writes."""
    from baton.gateway.lock import bundle_writer, verifier
    from baton.gateway.lock.closure import Closure

    assert verifier.BUNDLE_SCHEMA_VERSION == bundle_writer.BUNDLE_SCHEMA_VERSION
    assert verifier.LOCK_RECEIPT_SCHEMA_VERSION == bundle_writer.LOCK_RECEIPT_SCHEMA_VERSION
    both = Closure("npm", root=None, fetched=[], lockfile=b"{}", requirements=b"x==1\n")  # type: ignore[arg-type]
    assert sorted(bundle_writer.resolution_contents(both)) == sorted(verifier.RESOLUTION_FILES)
