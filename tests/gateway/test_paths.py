"""Which arguments are paths and their canonical form (the rules docs/gateway.md gives), case by case;
tests/gateway/test_cedar_paths.py drives them through a real ``baton serve``."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.errors import GatewayError
from baton.gateway.policy.paths import canonical_arguments, canonical_path, is_path_name
from baton.gateway.policy.policy_runtime import Mount

MOUNT = Mount(host="/srv/data", sandbox="/data", mode="rw")


@pytest.mark.parametrize(
    ("raw", "canonical", "escapes"),
    [
        ("/data/out/../escape.txt", "/data/escape.txt", False),
        ("/data/out/../../etc/passwd", "/etc/passwd", True),  # above the mount it named
        ("/../etc", "/etc", True),  # above /
        ("/data/out/./a//b/", "/data/out/a/b", False),
        ("//data/out", "/data/out", False),
        ("../x", "../x", True),  # a relative path keeps its leading ..
        ("a/../../x", "../x", True),
        ("a/..", ".", False),
        ("", "", False),
        ("/data/out/cafe\u0301.txt", "/data/out/caf\u00e9.txt", False),  # NFC
        ("/data/out/\uff0e\uff0e/x", "/data/out/\uff0e\uff0e/x", False),  # a lookalike stays a name
    ],
)
def test_a_path_is_canonical_and_says_whether_it_leaves_its_root(
    raw: str, canonical: str, escapes: bool
) -> None:
    assert canonical_path(raw, [MOUNT]) == (canonical, escapes)


@pytest.mark.parametrize("raw", ["/data/out/a\x00b", "/data/\x1b[31m", "/data/\tx", "/data/\x85x"])
def test_a_path_with_a_control_character_is_refused(raw: str) -> None:
    with pytest.raises(GatewayError) as refused:
        canonical_path(raw)
    assert refused.value.error_class == "invalid_arguments"


def test_a_symlink_in_a_mount_is_resolved_on_the_host_and_one_leaving_it_escapes(tmp_path: Path) -> None:
    host = tmp_path / "data"
    (host / "out").mkdir(parents=True)
    (host / "out" / "up").symlink_to("..")
    (host / "out" / "away").symlink_to(tmp_path)
    mount = Mount(host=str(host), sandbox="/data", mode="rw")
    assert canonical_path("/data/out/up/x", [mount]) == ("/data/x", False)
    assert canonical_path("/data/out/away/x", [mount]) == ("/data/out/away/x", True)


def test_only_path_arguments_are_rewritten() -> None:
    arguments = {
        "path": "/data/x/..",
        "filePaths": ["a/./b", "../c"],
        "destination": "out//d/",
        "sql": "/* a comment */ SELECT 1",
        "pattern": "/src/**/*.ts",
        "url": "//cdn.example.com/a//b",
        "location": "/data//y/",
        "source": "x = a // b\nprint(x)",
    }
    judged = canonical_arguments(arguments, [MOUNT])
    assert judged.arguments == {
        **arguments,
        "path": "/data",
        "filePaths": ["a/b", "../c"],
        "destination": "out/d",
        "location": "/data/y",
    }
    assert judged.path_escapes  # ../c
    assert [is_path_name(n) for n in ("filePath", "repo_path", "excludePatterns", "content")] == [
        True,
        True,
        False,
        False,
    ]
