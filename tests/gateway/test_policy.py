"""Adapter policies fail closed, each failure with its own error class."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from baton.errors import GatewayError
from baton.gateway.policy.policy_files import load_policy, parse_policy, write_policy


def valid_document() -> dict[str, Any]:
    return {
        "adapter": {
            "id": "demo",
            "candidate": "npm:demo@1.0.0",
            "risk_class": "high",
            "owner": "platform",
            "expires_at": (datetime.now(UTC) + timedelta(days=30)).isoformat(),
        },
        "artifacts": [{"ecosystem": "npm", "name": "demo", "version": "1.0.0", "sha512": "a" * 128}],
        "runtime": {"entrypoint": ["node", "node_modules/demo/cli.js"]},
        "tools": {"allowed": ["read"], "denied": ["write"]},
    }


def error_class_of(document: dict[str, Any]) -> str:
    with pytest.raises(GatewayError) as info:
        parse_policy(document)
    return info.value.error_class


def test_a_valid_policy_parses_with_fail_closed_defaults() -> None:
    policy = parse_policy(valid_document())
    assert policy.runtime.network == "none"
    assert policy.runtime.user == "65534:65534"
    assert policy.runtime.cap_drop == ["ALL"]
    assert policy.client.capabilities == {}
    assert policy.contract is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("network", "host"),
        ("read_only_root", False),
        ("no_new_privileges", False),
        ("cap_drop", ["NET_ADMIN"]),
        ("user", "0:0"),
    ],
)
def test_weakened_isolation_is_its_own_error_class(field: str, value: Any) -> None:
    document = valid_document()
    document["runtime"][field] = value
    assert error_class_of(document) == "adapter_isolation_weakened"


def test_an_expired_policy_is_refused() -> None:
    document = valid_document()
    document["adapter"]["expires_at"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    assert error_class_of(document) == "adapter_policy_expired"


def test_a_tool_both_allowed_and_denied_is_refused() -> None:
    document = valid_document()
    document["tools"]["denied"].append("read")
    assert error_class_of(document) == "adapter_tool_overlap"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["adapter"].update(expires_at="2030-01-01T00:00:00"),
        lambda d: d["adapter"].update(id="Bad_Id"),
        lambda d: d["artifacts"][0].update(sha512="abc"),
        lambda d: d["artifacts"][0].update(name="../../etc"),
        lambda d: d["artifacts"][0].update(name="@scope/../x"),
        lambda d: d["artifacts"][0].update(version="1.0.0/../../x"),
        lambda d: d["artifacts"].append(copy.deepcopy(d["artifacts"][0])),
        lambda d: d["runtime"].update(pids_limit=0),
        lambda d: d["runtime"].update(memory_limit="lots"),
        lambda d: d["runtime"].update(env={"OPENAI_API_KEY": "x"}),
        lambda d: d["runtime"].update(sandbox="docker"),
        lambda d: d["tools"].update(approval_required=["write"]),
        lambda d: d.update(extra_section={}),
        lambda d: d.update(client={"capabilities": {"telepathy": {}}}),
        lambda d: d["runtime"].update(pids_limit="10"),
    ],
)
def test_every_other_malformed_field_is_adapter_policy_invalid(mutate: Any) -> None:
    document = valid_document()
    mutate(document)
    assert error_class_of(document) == "adapter_policy_invalid"


def test_policies_round_trip_through_toml_with_a_stable_checksum(tmp_path: Path) -> None:
    policy = parse_policy(valid_document())
    path = tmp_path / "demo.toml"
    checksum = write_policy(path, policy)
    loaded, again = load_policy(path)
    assert loaded == policy
    assert again == checksum


def test_missing_and_unreadable_policy_files_fail_closed(tmp_path: Path) -> None:
    with pytest.raises(GatewayError) as missing:
        load_policy(tmp_path / "nope.toml")
    assert missing.value.error_class == "adapter_not_found"
    bad = tmp_path / "bad.toml"
    bad.write_text("[adapter\n", encoding="utf-8")
    with pytest.raises(GatewayError) as broken:
        load_policy(bad)
    assert broken.value.error_class == "adapter_policy_invalid"


@pytest.mark.parametrize(
    ("network", "origins", "valid"),
    [
        ("allowlist", ["http://127.0.0.1:8080", "https://example.org"], True),
        ("allowlist", [], False),
        ("none", ["http://127.0.0.1:8080"], False),
        ("allowlist", ["ftp://example.org"], False),
        ("allowlist", ["http://example.org/path"], False),
    ],
)
def test_a_network_allowlist_needs_exact_origins(network: str, origins: list[str], valid: bool) -> None:
    document = valid_document()
    document["runtime"].update(network=network, allowed_origins=origins)
    if valid:
        assert parse_policy(document).runtime.allowed_origins == origins
    else:
        assert error_class_of(document) == "adapter_policy_invalid"


def with_mounts(*mounts: dict[str, str]) -> dict[str, Any]:
    document = valid_document()
    document["runtime"]["mounts"] = list(mounts)
    return document


@pytest.mark.parametrize(
    "mount",
    [
        {"host": "relative/path", "sandbox": "/data"},
        {"host": "/", "sandbox": "/data"},
        {"host": "/srv/../etc", "sandbox": "/data"},
        {"host": "/srv/data/", "sandbox": "/data"},
        {"host": "/etc", "sandbox": "/data"},
        {"host": "/etc/ssh", "sandbox": "/data"},
        {"host": "/proc/1", "sandbox": "/data"},
        {"host": "/root/.ssh", "sandbox": "/data"},
        {"host": "/var/lib", "sandbox": "/data"},
        {"host": "/usr", "sandbox": "/data"},
        {"host": "/srv/data", "sandbox": "data"},
        {"host": "/srv/data", "sandbox": "/work"},
        {"host": "/srv/data", "sandbox": "/work/node_modules"},
        {"host": "/srv/data", "sandbox": "/tmp/x"},
        {"host": "/srv/data", "sandbox": "/usr/local"},
        {"host": "/srv/data", "sandbox": "/opt"},
        {"host": "/srv/data", "sandbox": "/"},
        {"host": "/srv/data", "sandbox": "/data", "mode": "rwx"},
        {"host": "/srv/a:b", "sandbox": "/data"},
        {"host": "/srv/data", "sandbox": "/data\nx"},
    ],
)
def test_a_mount_of_a_system_tree_or_over_the_sandboxs_own_paths_is_invalid(mount: dict[str, str]) -> None:
    assert error_class_of(with_mounts(mount)) == "adapter_policy_invalid"


def test_overlapping_mount_targets_are_invalid() -> None:
    document = with_mounts({"host": "/srv/a", "sandbox": "/data"}, {"host": "/srv/b", "sandbox": "/data/b"})
    assert error_class_of(document) == "adapter_policy_invalid"


def test_mounts_are_part_of_the_policy_checksum(tmp_path: Path) -> None:
    plain = parse_policy(valid_document())
    mounted = parse_policy(with_mounts({"host": "/srv/data", "sandbox": "/data", "mode": "ro"}))
    assert mounted.runtime.mounts[0].mode == "ro"
    first = write_policy(tmp_path / "a.toml", plain)
    second = write_policy(tmp_path / "b.toml", mounted)
    assert first != second
    assert load_policy(tmp_path / "b.toml")[0].runtime.mounts == mounted.runtime.mounts


@pytest.mark.parametrize("tmpfs", ["/tmp:rw,suid", "/var/tmp:rw", "/tmp:rw,noexec,size=64x", "/tmp"])
def test_tmpfs_options_the_sandbox_cannot_enforce_are_refused(tmpfs: str) -> None:
    document = valid_document()
    document["runtime"]["tmpfs"] = tmpfs
    assert error_class_of(document) == "adapter_policy_invalid"


def host_checks(mount: dict[str, str], home: Path) -> str:
    from baton.gateway.policy.policy_runtime import Mount
    from baton.gateway.sandbox.mounts import check_mount

    with pytest.raises(GatewayError) as info:
        check_mount(Mount.model_validate(mount), home)
    return info.value.error_class


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A directory every user can enter (pytest's own tmp_path lies under a 0700 directory)."""
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="baton-mounts-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def test_a_mount_is_checked_against_the_host_at_every_start(reachable: Path) -> None:
    from baton.gateway.policy.policy_runtime import Mount
    from baton.gateway.sandbox.mounts import check_mount

    home = reachable / "home" / "baton"
    home.mkdir(parents=True)
    data = reachable / "data"
    data.mkdir()
    (reachable / "link").symlink_to(data)
    assert (
        host_checks({"host": str(reachable / "missing"), "sandbox": "/data"}, home) == "adapter_mount_invalid"
    )
    assert host_checks({"host": str(reachable / "link"), "sandbox": "/data"}, home) == "adapter_mount_invalid"
    for forbidden in (home, home.parent, home / "gateway"):
        forbidden.mkdir(exist_ok=True)
        assert host_checks({"host": str(forbidden), "sandbox": "/data"}, home) == "adapter_mount_invalid"
    mounted = check_mount(Mount.model_validate({"host": str(data), "sandbox": "/data"}), home)
    assert (mounted.host, mounted.sandbox, mounted.mode) == (data, "/data", "ro")


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox writes as host uid 65534 only when baton is root")
def test_a_rw_mount_uid_65534_cannot_write_is_refused_not_silently_read_only(reachable: Path) -> None:
    from baton.gateway.policy.policy_runtime import Mount
    from baton.gateway.sandbox.mounts import check_mount

    data = reachable / "data"
    data.mkdir(mode=0o755)
    mount = {"host": str(data), "sandbox": "/data", "mode": "rw"}
    assert host_checks(mount, reachable / "home") == "adapter_mount_not_writable"
    os.chown(data, 65534, 65534)
    assert check_mount(Mount.model_validate(mount), reachable / "home").mode == "rw"


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the sandbox's user is 65534, another user than baton")
def test_a_mount_behind_a_directory_the_sandbox_cannot_enter_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"  # tmp_path lies under pytest's 0700 directory
    data.mkdir()
    assert host_checks({"host": str(data), "sandbox": "/data"}, tmp_path / "home") == "adapter_mount_invalid"
