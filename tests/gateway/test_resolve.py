"""Resolution by the ecosystems' own resolvers (npm's lockfile, uv), checked by baton; typed lock failures."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_settings
from baton.errors import GatewayError
from baton.gateway.lock import artifacts, stages
from baton.gateway.lock.candidates import parse_candidate
from baton.gateway.policy import bookkeeping
from baton.gateway.policy.policy_files import load_policy, write_policy
from baton.gateway.replay.extract import materialize
from baton.gateway.replay.replay import replay
from baton.gateway.sandbox.bwrap_command import HOST_PATH
from baton.runtime import Runtime
from baton.testing.npm_registry import NpmRegistryServer, build_python_wheel, build_tarball, integrity_of
from tests.needs import require

DATA = Path(__file__).parent / "data"
needs_npm = pytest.mark.needs("node")

#: A stdio MCP server in plain node: one tool whose name says which content-type versions it loaded.
NODE_SERVER = r"""
const left = require("left"), right = require("right");
const tool = `ct_${left.ct.replace(/\./g, "_")}__${right.ct.replace(/\./g, "_")}`;
let buffer = "";
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let at;
  while ((at = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, at); buffer = buffer.slice(at + 1);
    if (!line.trim()) continue;
    const message = JSON.parse(line);
    const reply = (result) => process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: message.id, result}) + "\n");
    if (message.method === "initialize") {
      reply({protocolVersion: message.params.protocolVersion, capabilities: {tools: {}},
             serverInfo: {name: "nested-demo", version: "0.1.0"}});
    } else if (message.method === "tools/list") {
      reply({tools: [{name: tool, inputSchema: {type: "object"}, annotations: {readOnlyHint: true}}]});
    }
  }
});
process.stdin.on("end", () => process.exit(0));
"""


def package(name: str, version: str, files: dict[str, str] | None = None, **manifest: Any) -> bytes:
    """An npm tarball whose package.json names ``name@version``."""
    document = {"name": name, "version": version, **manifest}
    contents = {
        "package/package.json": json.dumps(document),
        **{f"package/{k}": v for k, v in (files or {}).items()},
    }
    return build_tarball(contents)


def publish_nested_tree(registry: NpmRegistryServer) -> None:
    """left wants content-type ^1, right ^2 (npm nests one of them); content-type has non-semver versions."""
    exports = {"index.js": 'module.exports = {ct: require("content-type/package.json").version};'}
    registry.publish("content-type", "1.0.5", package("content-type", "1.0.5"))
    registry.publish("content-type", "2.0.0", package("content-type", "2.0.0"))
    registry.publish("content-type", "1.0.0beta", package("content-type", "1.0.0beta"), latest=False)
    registry.publish("left", "1.0.0", package("left", "1.0.0", exports), dependencies={"content-type": "^1"})
    registry.publish(
        "right", "1.0.0", package("right", "1.0.0", exports), dependencies={"content-type": "^2"}
    )
    top = package("@demo/top", "0.1.0", {"server.js": NODE_SERVER}, bin={"top": "server.js"})
    registry.publish(
        "@demo/top", "0.1.0", top, dependencies={"left": "^1", "right": "^1"}, bin={"top": "server.js"}
    )


def failure(runtime: Runtime, adapter_id: str) -> dict[str, Any]:
    """The failure receipt the last failed stage wrote."""
    directory = runtime.settings.home / "gateway" / adapter_id / "receipts"
    newest = max(directory.glob("*-failure-*.json"), key=lambda p: p.stat().st_mtime_ns)
    value: dict[str, Any] = json.loads(newest.read_bytes())
    return value


def lock_fails(runtime: Runtime, candidate: str, error_class: str, **options: Any) -> GatewayError:
    """Lock ``candidate`` and expect the typed failure, with its failure receipt."""
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, candidate, **options)
    assert info.value.error_class == error_class, info.value.message
    return info.value


@pytest.mark.parametrize(
    ("candidate", "parsed"),
    [
        ("npm:left", ("npm", "left", "latest")),
        ("npm:left@1.0.0", ("npm", "left", "1.0.0")),
        ("npm:left@^1.2 || >=3", ("npm", "left", "^1.2 || >=3")),
        ("npm:@scope/name", ("npm", "@scope/name", "latest")),
        ("npm:@scope/name@~2.1", ("npm", "@scope/name", "~2.1")),
        ("npm:@scope/name@next", ("npm", "@scope/name", "next")),
        ("pypi:mcp-server-time", ("pypi", "mcp-server-time", None)),
        ("pypi:mcp-server-time==2025.9.25", ("pypi", "mcp-server-time", "2025.9.25")),
    ],
)
def test_candidates_parse_names_versions_ranges_and_scopes(
    candidate: str, parsed: tuple[str, str, str | None]
) -> None:
    assert parse_candidate(candidate) == parsed


@pytest.mark.parametrize(
    "candidate",
    [
        "left",
        "npm:",
        "npm:left@file:../x",
        "npm:left@git+https://example.invalid/x.git",
        "npm:left@http://127.0.0.1/x.tgz",
        "npm:../evil",
        "npm:left@npm:other@1",
        "npm:Left Pad",
        "pypi:",
        "pypi:name>=1",
        "pypi:name==",
        "pypi:../x",
        "cargo:serde",
        "npm:@scope/",
    ],
)
def test_malformed_candidates_are_typed_failures(candidate: str) -> None:
    with pytest.raises(GatewayError) as info:
        parse_candidate(candidate)
    assert info.value.error_class == "adapter_candidate_invalid"


@needs_npm
def test_npm_resolves_a_nested_tree_with_non_semver_versions_and_replay_nests_it(
    runtime: Runtime, registry: NpmRegistryServer, tmp_path: Path
) -> None:
    publish_nested_tree(registry)
    locked = artifacts.lock(runtime, "npm:@demo/top")
    assert set(locked["packages"]) == {
        "@demo/top@0.1.0", "left@1.0.0", "right@1.0.0", "content-type@1.0.5", "content-type@2.0.0",
    }  # fmt: skip
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert policy.resolution.npm_lockfile_sha256 == locked["resolution_files"]["package-lock.json"]
    assert policy.runtime.entrypoint == ["node", "node_modules/@demo/top/server.js"]
    assert policy.interpreter is not None and policy.interpreter.kind == "node"
    bundle = runtime.settings.home / "gateway" / "demo-top" / "bundle"
    lockfile = json.loads((bundle / "package-lock.json").read_text())
    nested = [p for p in lockfile["packages"] if p.count("node_modules/") == 2]
    assert len(nested) == 1 and nested[0].endswith("node_modules/content-type")
    assert stages.verify(runtime, "demo-top")["status"] == "completed_verified"
    tree = materialize(policy, bundle, tmp_path / "tree")
    assert tree.file_count == 8
    nested_version = json.loads((tmp_path / "tree" / nested[0] / "package.json").read_text())["version"]
    top_version = json.loads((tmp_path / "tree/node_modules/content-type/package.json").read_text())[
        "version"
    ]
    assert {nested_version, top_version} == {"1.0.5", "2.0.0"}
    require("bwrap")
    observed = replay(runtime, "demo-top", apply=True, record=True)["protocol_observation"]
    assert observed["adapter_allowed_tools"] == [] and observed["tool_count"] == 1
    pinned, _ = load_policy(Path(locked["policy_path"]))
    assert pinned.tools.denied == ["ct_1_0_5__2_0_0"]


@needs_npm
def test_a_real_packument_with_non_semver_versions_locks_the_newest(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    """express's recorded registry document (1.0.0beta, 3.0.0alpha1 ...) served through the loopback."""
    for name in ("express", "content-type"):
        document = json.loads((DATA / f"npm-{name}.json").read_text())
        for version, manifest in document["versions"].items():
            dependencies = {"content-type": "~1.0.4"} if name == "express" else {}
            tarball = package(name, version, {"index.js": ""})
            filename = registry.publish(name, version, tarball, dependencies=dependencies, latest=False)
            served = copy.deepcopy(manifest) | {"dependencies": dependencies}
            served["dist"] = {
                "tarball": f"{registry.url}/-/tarballs/{filename}",
                "integrity": integrity_of(tarball),
            }
            document["versions"][version] = served
        registry.serve_raw(name, document)
    locked = artifacts.lock(runtime, "npm:express")
    assert set(locked["packages"]) == {"express@5.3.0", "content-type@1.0.5"}
    assert stages.verify(runtime, "express")["status"] == "completed_verified"
    older = artifacts.lock(runtime, "npm:express@^4", adapter_id="older")
    assert set(older["packages"]) == {"express@4.21.2", "content-type@1.0.5"}
    # npm itself cannot install a non-semver version: a typed failure, never a crash
    lock_fails(runtime, "npm:express@1.0.0beta", "artifact_dependency_unresolvable", adapter_id="beta")


@needs_npm
def test_install_scripts_are_refused_unless_the_policy_accepts_running_without_them(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    native = package("native", "1.0.0", scripts={"postinstall": "node build.js"})
    registry.publish(
        "native", "1.0.0", native, scripts={"postinstall": "node build.js"}, hasInstallScript=True
    )
    registry.publish("app", "1.0.0", package("app", "1.0.0", {"index.js": ""}), dependencies={"native": "1"})
    error = lock_fails(runtime, "npm:app", "artifact_install_script_refused")
    assert error.details["packages"] == ["native@1.0.0"]
    assert failure(runtime, "app")["error_class"] == "artifact_install_script_refused"
    locked = artifacts.lock(runtime, "npm:app", allow_without_install_scripts=["native"])
    assert locked["without_install_scripts"] == ["native@1.0.0"]
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert policy.resolution.allow_without_install_scripts == ["native"]


@needs_npm
def test_every_install_script_is_refused_in_one_message_before_any_download_and_one_flag_accepts_them(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    for name in ("native-a", "native-b"):
        scripts = {"postinstall": "node build.js"}
        registry.publish(
            name, "1.0.0", package(name, "1.0.0", scripts=scripts), scripts=scripts, hasInstallScript=True
        )
    deps = {"native-a": "1", "native-b": "1"}
    registry.publish("app", "1.0.0", package("app", "1.0.0", {"index.js": ""}), dependencies=deps)
    error = lock_fails(runtime, "npm:app", "artifact_install_script_refused")
    assert error.details["packages"] == ["native-a@1.0.0", "native-b@1.0.0"]
    assert "--allow-without-install-scripts native-a,native-b" in error.message
    assert not [r for r in registry.requests if "/-/tarballs/" in r], "refused before any download"
    locked = artifacts.lock(
        runtime, "npm:app", adapter_id="app2", allow_without_install_scripts=["native-a", "native-b"]
    )
    assert locked["without_install_scripts"] == ["native-a@1.0.0", "native-b@1.0.0"]


@needs_npm
def test_a_binding_gyp_counts_as_an_install_script_even_when_the_registry_hides_it(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    registry.publish("gyp", "1.0.0", package("gyp", "1.0.0", {"binding.gyp": "{}"}))
    lock_fails(runtime, "npm:gyp", "artifact_install_script_refused")


@needs_npm
def test_a_registry_whose_integrity_lies_fails_closed(runtime: Runtime, registry: NpmRegistryServer) -> None:
    registry.publish("liar", "1.0.0", package("liar", "1.0.0"), integrity=integrity_of(b"other bytes"))
    lock_fails(runtime, "npm:liar", "artifact_integrity_mismatch")
    assert not (runtime.settings.home / "adapters" / "liar.toml").exists()


@needs_npm
def test_a_registry_that_tells_baton_another_integrity_than_npm_fails_closed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    # npm's lockfile carries the tarball's own sha512, so the bytes match it; only the comparison of the
    # lockfile's sha512 with the registry's (the document baton reads) catches the two answers
    registry.publish("two-faced", "1.0.0", package("two-faced", "1.0.0"))
    document = {"name": "two-faced", "versions": copy.deepcopy(registry.packages["two-faced"])}
    document["versions"]["1.0.0"]["dist"]["integrity"] = integrity_of(b"other bytes")
    registry.serve_raw_unless_npm("two-faced", document)
    error = lock_fails(runtime, "npm:two-faced", "artifact_integrity_mismatch")
    assert "sha512 of the registry" in error.message
    assert not (runtime.settings.home / "adapters" / "two-faced.toml").exists()


@needs_npm
def test_a_registry_that_tells_baton_another_tarball_url_than_npm_fails_closed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    # the URL baton's document names serves the same bytes, so every hash agrees: only the comparison of
    # the lockfile's resolved URL with the registry's dist.tarball catches the two answers
    filename = registry.publish("two-urls", "1.0.0", package("two-urls", "1.0.0"))
    registry.tarballs["elsewhere.tgz"] = registry.tarballs[filename]
    document = {"name": "two-urls", "versions": copy.deepcopy(registry.packages["two-urls"])}
    document["versions"]["1.0.0"]["dist"]["tarball"] = f"{registry.url}/-/tarballs/elsewhere.tgz"
    registry.serve_raw_unless_npm("two-urls", document)
    error = lock_fails(runtime, "npm:two-urls", "artifact_metadata_invalid")
    assert "tarball URL" in error.message


@needs_npm
def test_a_lockfile_resolving_a_package_outside_the_registry_fails_closed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    # the registry points the tarball at another server, which serves the very bytes the integrity names
    tarball = package("offsite", "1.0.0")
    with NpmRegistryServer() as other:
        other.publish("offsite", "1.0.0", tarball)
        registry.publish("offsite", "1.0.0", tarball)
        registry.packages["offsite"]["1.0.0"]["dist"]["tarball"] = f"{other.url}/-/tarballs/offsite-1.0.0.tgz"
        error = lock_fails(runtime, "npm:offsite", "artifact_metadata_invalid")
    assert "outside the registry" in error.message
    assert not [r for r in other.requests if "/-/tarballs/" in r], "nothing fetched from outside"


def sha1_sri(data: bytes) -> str:
    """An SRI value with only a sha1, as packages published before 2017 carry."""
    return "sha1-" + base64.b64encode(hashlib.sha1(data, usedforsecurity=False).digest()).decode()


@needs_npm
def test_a_sha1_only_package_is_accepted_only_when_the_lockfile_and_the_registry_agree(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    tarball = package("old", "1.0.0", {"cli.js": ""}, bin={"old": "cli.js"})
    registry.publish("old", "1.0.0", tarball, integrity=sha1_sri(tarball), bin={"old": "cli.js"})
    locked = artifacts.lock(runtime, "npm:old")
    assert locked["packages"]["old@1.0.0"] == hashlib.sha512(tarball).hexdigest()
    # npm's lockfile carries the tarball's sha1; the document baton reads names other bytes' sha1
    registry.publish("old-two-faced", "1.0.0", tarball, integrity=sha1_sri(tarball), bin={"old": "cli.js"})
    document = {"name": "old-two-faced", "versions": copy.deepcopy(registry.packages["old-two-faced"])}
    document["versions"]["1.0.0"]["dist"]["integrity"] = sha1_sri(b"other bytes")
    registry.serve_raw_unless_npm("old-two-faced", document)
    error = lock_fails(runtime, "npm:old-two-faced", "artifact_integrity_mismatch")
    assert "both the lockfile and registry" in error.message


@needs_npm
def test_unresolvable_ranges_and_unknown_packages_are_typed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    registry.publish("dep", "1.0.0", package("dep", "1.0.0"))
    registry.publish("wants-three", "1.0.0", package("wants-three", "1.0.0"), dependencies={"dep": "^3"})
    lock_fails(runtime, "npm:wants-three", "artifact_dependency_unresolvable")
    lock_fails(runtime, "npm:dep@^7", "artifact_dependency_unresolvable")
    lock_fails(runtime, "npm:nobody-published-this", "artifact_registry_error")


@needs_npm
def test_registry_errors_and_malformed_documents_are_typed(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    registry.fail("broken", 500)
    lock_fails(runtime, "npm:broken", "artifact_registry_error")
    registry.serve_raw("garbled", b"{not json")
    lock_fails(runtime, "npm:garbled", "artifact_metadata_invalid")
    registry.serve_raw("odd", {"name": "odd", "dist-tags": {"latest": "x.y"}, "versions": {"x.y": "no"}})
    with pytest.raises(GatewayError) as info:
        artifacts.lock(runtime, "npm:odd")
    assert info.value.error_class in ("artifact_metadata_invalid", "artifact_dependency_unresolvable")


@needs_npm
def test_optional_packages_for_other_platforms_are_skipped_required_ones_refused(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    registry.publish("mac-only", "1.0.0", package("mac-only", "1.0.0"), os=["darwin"])
    registry.publish(
        "portable",
        "1.0.0",
        package("portable", "1.0.0", {"index.js": ""}),
        optionalDependencies={"mac-only": "1.0.0"},
    )
    locked = artifacts.lock(runtime, "npm:portable")
    assert set(locked["packages"]) == {"portable@1.0.0"}
    assert locked["skipped_optional"] == ["node_modules/mac-only"]
    assert stages.verify(runtime, "portable")["status"] == "completed_verified"
    registry.publish("needs-mac", "1.0.0", package("needs-mac", "1.0.0"), dependencies={"mac-only": "1.0.0"})
    lock_fails(runtime, "npm:needs-mac", "artifact_platform_unsupported")


@pytest.fixture
def pypi(runtime: Runtime, registry: NpmRegistryServer) -> Iterator[Runtime]:
    """A runtime whose PyPI index (and npm registry) is the loopback registry; closed afterwards."""
    settings = load_settings(
        {
            "BATON_HOME": str(runtime.settings.home),
            "BATON_NPM_REGISTRY": registry.url,
            "BATON_PYPI_URL": registry.url,
        }
    )
    opened = Runtime.open(settings)
    yield opened
    opened.close()


#: The wheel's server: the test MCP server whose one tool says what the isolated interpreter can import.
PROBE = """
import importlib.util, json, os, sys
found = lambda name: importlib.util.find_spec(name) is not None
name = "dep_%s__host_yaml_%s__host_jwt_%s__usersite_%s" % (
    found("dep_a"), found("yaml"), found("jwt"), any("dist-packages" in p or "site-packages" in p and "/work/" not in p for p in sys.path))
os.environ["BATON_TEST_MCP_TOOLS"] = json.dumps([{"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}])
def main():
    import baton_probe.server as server
    server.main()
"""


def publish_probe(registry: NpmRegistryServer) -> None:
    from baton.testing import mcp_stdio_server

    server = Path(mcp_stdio_server.__file__).read_text(encoding="utf-8")
    modules = {"baton_probe/__init__.py": PROBE, "baton_probe/server.py": server}
    filename, wheel = build_python_wheel(
        "baton-probe",
        "1.0.0",
        modules,
        requires=["dep-a>=1"],
        console_scripts={"baton-probe": "baton_probe:main"},
    )
    registry.publish_wheel("baton-probe", "1.0.0", filename, wheel)
    for version in ("1.0", "1.1"):
        filename, wheel = build_python_wheel("dep-a", version, {"dep_a.py": f"VERSION = {version!r}\n"})
        registry.publish_wheel("dep-a", version, filename, wheel)


def test_pypi_resolves_the_whole_closure_with_uv_and_pins_every_wheel(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    publish_probe(registry)
    locked = artifacts.lock(pypi, "pypi:baton-probe")
    assert set(locked["packages"]) == {"baton-probe@1.0.0", "dep-a@1.1"}
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert policy.runtime.entrypoint == ["python3", "-I", "-S", "baton_boot.py", "baton_probe:main"]
    assert all(a.sha256 and a.filename for a in policy.artifacts)
    assert policy.interpreter is not None and policy.interpreter.kind == "python"
    requirements = (runtime.settings.home / "gateway/baton-probe/bundle/requirements.txt").read_text()
    assert requirements.count("--hash=sha256:") == 2
    assert stages.verify(pypi, "baton-probe")["status"] == "completed_verified"


def test_the_sandboxed_python_sees_only_the_bundle_not_the_host_site(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    require("bwrap")
    if not any(Path("/usr/lib/python3/dist-packages").glob("yaml")):
        pytest.skip("the host has no yaml in dist-packages to hide")
    publish_probe(registry)
    artifacts.lock(pypi, "pypi:baton-probe")
    stages.verify(pypi, "baton-probe")
    observed = replay(pypi, "baton-probe", apply=True, record=True)
    policy, _ = load_policy(runtime.settings.home / "adapters" / "baton-probe.toml")
    assert observed["protocol_observation"]["tool_count"] == 1
    assert policy.tools.denied == ["dep_True__host_yaml_False__host_jwt_False__usersite_False"]


def test_a_release_without_a_wheel_for_this_platform_is_typed(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    filename, wheel = build_python_wheel("winonly", "1.0", {"winonly.py": ""}, tag="cp311-cp311-win_amd64")
    registry.publish_wheel("winonly", "1.0", filename, wheel)
    lock_fails(pypi, "pypi:winonly", "artifact_no_wheel_for_platform")
    assert failure(pypi, "winonly")["error_class"] == "artifact_no_wheel_for_platform"


def test_a_lying_index_and_an_unknown_project_are_typed(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    filename, wheel = build_python_wheel("liar", "1.0", {"liar.py": ""})
    registry.publish_wheel("liar", "1.0", filename, wheel, sha256="0" * 64)
    with pytest.raises(GatewayError) as info:
        artifacts.lock(pypi, "pypi:liar")
    assert info.value.error_class in ("artifact_integrity_mismatch", "artifact_metadata_invalid")
    lock_fails(pypi, "pypi:nobody-published-this", "artifact_dependency_unresolvable")


@needs_npm
def test_a_tarball_whose_root_directory_is_not_package_extracts_like_npm(
    runtime: Runtime, registry: NpmRegistryServer, tmp_path: Path
) -> None:
    """@types tarballs use their own name as the root directory; npm strips it like package/."""
    manifest = json.dumps({"name": "@types/thing", "version": "1.0.0"})
    binary = tarfile.TarInfo("thing/bin/tool")
    binary.size, binary.mode = 2, 0o755
    tarball = build_tarball({"thing/package.json": manifest, "thing/index.d.ts": ""}, [(binary, b"#!")])
    registry.publish("@types/thing", "1.0.0", tarball)
    registry.publish(
        "typed", "1.0.0", package("typed", "1.0.0", {"index.js": ""}), dependencies={"@types/thing": "1"}
    )
    locked = artifacts.lock(runtime, "npm:typed")
    policy, _ = load_policy(Path(locked["policy_path"]))
    materialize(policy, runtime.settings.home / "gateway/typed/bundle", tmp_path / "tree")
    assert (tmp_path / "tree/node_modules/@types/thing/index.d.ts").stat().st_mode & 0o777 == 0o444
    assert (tmp_path / "tree/node_modules/@types/thing/bin/tool").stat().st_mode & 0o777 == 0o555


def test_a_package_larger_than_the_unpacked_limit_is_refused(tmp_path: Path) -> None:
    """The byte limit holds on the declared sizes, before anything large is read."""
    from baton.gateway.lock.tarballs import extract_package

    tarball = tmp_path / "big.tgz"
    tarball.write_bytes(build_tarball({"package/package.json": "{}", "package/a.bin": b"x" * 4096}))
    with pytest.raises(GatewayError) as info:
        extract_package(tarball, tmp_path / "out", max_bytes=4000)
    assert info.value.error_class == "artifact_archive_limits_exceeded"


@needs_npm
def test_an_npm_constraint_overrides_a_range_anywhere_in_the_tree(
    runtime: Runtime, registry: NpmRegistryServer
) -> None:
    publish_nested_tree(registry)
    locked = artifacts.lock(runtime, "npm:@demo/top", constraints=["content-type@2.0.0"])
    assert set(locked["packages"]) == {"@demo/top@0.1.0", "left@1.0.0", "right@1.0.0", "content-type@2.0.0"}
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert policy.resolution.constraints == ["content-type@2.0.0"]
    assert stages.verify(runtime, "demo-top")["status"] == "completed_verified"


def test_a_pypi_constraint_narrows_the_closure_and_is_pinned_in_the_policy(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    publish_probe(registry)
    locked = artifacts.lock(pypi, "pypi:baton-probe", constraints=["dep_a < 1.1"])
    assert set(locked["packages"]) == {"baton-probe@1.0.0", "dep-a@1.0"}
    policy, _ = load_policy(Path(locked["policy_path"]))
    assert policy.resolution.constraints == ["dep-a<1.1"]
    assert stages.verify(pypi, "baton-probe")["status"] == "completed_verified"
    listed = {row["adapter_id"]: row for row in bookkeeping.list_view(pypi)}
    assert listed["baton-probe"]["constraints"] == ["dep-a<1.1"]
    # constraints belong to the draft: the policy is locked again from its pinned resolver output
    lock_fails(pypi, "baton-probe", "adapter_candidate_invalid", constraints=["dep-a<1.1"])
    lock_fails(
        pypi,
        "pypi:baton-probe",
        "artifact_dependency_unresolvable",
        adapter_id="none",
        constraints=["dep-a>2"],
    )


@pytest.mark.parametrize(
    ("candidate", "constraints"),
    [
        ("pypi:x", ["dep-a @ https://example.invalid/dep_a.whl"]),
        ("pypi:x", ["dep-a[extra]<2"]),
        ("pypi:x", ["dep-a<2; python_version < '3'"]),
        ("pypi:x", ["dep-a"]),
        ("pypi:x", ["not a requirement!"]),
        ("pypi:x", ["dep-a<2", "dep_a>1"]),
        ("pypi:x", ["dep-a<2\n--index-url http://evil.invalid"]),
        ("npm:x", ["content-type"]),
        ("npm:x", ["content-type@file:../x"]),
        ("npm:x", ["content-type@^1", "content-type@^2"]),
        ("npm:x", [f"p{i}@1" for i in range(65)]),
    ],
)
def test_malformed_constraints_are_refused_before_anything_runs(
    runtime: Runtime, candidate: str, constraints: list[str]
) -> None:
    lock_fails(runtime, candidate, "adapter_candidate_invalid", constraints=constraints)
    assert not (runtime.settings.home / "adapters" / "x.toml").exists()


#: A server whose one tool says whether its wheel's console script runs in the sandbox and sees the CA store.
CLI_PROBE = """
import json, os, shutil, subprocess
def cli():
    print("cli-ran")
def main():
    ran = subprocess.run(["probe-cli"], capture_output=True, text=True, check=False).stdout.strip()
    where = shutil.which("probe-cli")
    certs = os.path.isdir("/etc/ssl/certs")
    ls = (shutil.which("ls") or "none").replace("/", "_")
    name = "%s__%s__certs_%s__ls%s" % (ran.replace("-", "_"), (where or "none").replace("/", "_"), certs, ls)
    os.environ["BATON_TEST_MCP_TOOLS"] = json.dumps([{"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}])
    import baton_cli_probe.server as server
    server.main()
"""


def test_console_scripts_of_the_wheels_run_in_the_sandbox_through_the_isolated_boot(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    require("bwrap")
    from baton.testing import mcp_stdio_server

    server = Path(mcp_stdio_server.__file__).read_text(encoding="utf-8")
    modules = {"baton_cli_probe/__init__.py": CLI_PROBE, "baton_cli_probe/server.py": server}
    scripts = {
        "baton-cli-probe": "baton_cli_probe:main",
        "probe-cli": "baton_cli_probe:cli",
        "ls": "x:y",
    }
    filename, wheel = build_python_wheel("baton-cli-probe", "1.0.0", modules, console_scripts=scripts)
    registry.publish_wheel("baton-cli-probe", "1.0.0", filename, wheel)
    artifacts.lock(pypi, "pypi:baton-cli-probe")
    stages.verify(pypi, "baton-cli-probe")
    observed = replay(pypi, "baton-cli-probe", apply=True, record=True)
    assert observed["protocol_observation"]["tool_count"] == 1
    policy, _ = load_policy(runtime.settings.home / "adapters" / "baton-cli-probe.toml")
    # the launcher ran; a wheel's "ls" script is on PATH after the system's, so it shadows nothing
    # the host's CA store is seen inside when the host has one
    certs = Path("/etc/ssl/certs").is_dir()
    ls = (shutil.which("ls", path=HOST_PATH) or "none").replace("/", "_")
    assert policy.tools.denied == [f"cli_ran___work_bin_probe-cli__certs_{certs}__ls{ls}"]


def test_a_newer_release_is_drafted_as_the_next_version_of_an_existing_policy_with_replace(
    runtime: Runtime, registry: NpmRegistryServer, pypi: Runtime
) -> None:
    publish_probe(registry)
    locked = artifacts.lock(pypi, "pypi:baton-probe==1.0.0", constraints=["dep-a<1.1"])
    path = Path(locked["policy_path"])
    policy, _ = load_policy(path)
    owned = policy.model_copy(
        update={
            "adapter": policy.adapter.model_copy(update={"owner": "ops"}),
            "runtime": policy.runtime.model_copy(update={"env": {"PROBE_MODE": "1"}}),
            "tools": policy.tools.model_copy(update={"allowed": ["probe"], "approval_required": ["probe"]}),
            "serving": policy.serving.model_copy(update={"unprefixed": True}),
        }
    )
    write_policy(path, owned)
    filename, wheel = build_python_wheel(
        "baton-probe", "1.1.0", {"baton_probe/__init__.py": PROBE}, requires=["dep-a>=1"]
    )
    registry.publish_wheel("baton-probe", "1.1.0", filename, wheel)

    error = lock_fails(pypi, "pypi:baton-probe", "adapter_policy_exists")
    assert "--replace" in error.message
    lock_fails(pypi, "pypi:baton-probe", "adapter_not_found", adapter_id="nobody", replace=True)

    upgraded = artifacts.lock(pypi, "pypi:baton-probe", adapter_id="baton-probe", replace=True)
    assert set(upgraded["packages"]) == {"baton-probe@1.1.0", "dep-a@1.0"}  # the constraint is kept
    following, _ = load_policy(path)
    assert following.adapter.candidate == "pypi:baton-probe" and following.adapter.owner == "ops"
    assert following.runtime.env == {"PROBE_MODE": "1"} and following.contract is None
    assert (following.tools.allowed, following.tools.approval_required) == (["probe"], ["probe"])
    assert following.resolution.constraints == ["dep-a<1.1"] and following.serving.unprefixed
    assert stages.verify(pypi, "baton-probe")["status"] == "completed_verified"
