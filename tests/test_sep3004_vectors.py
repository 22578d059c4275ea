"""SEP-3004's published vectors (tests/data/sep3004, 23 of them) pass against baton's canonicalization."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from baton.evidence import sep3004

DATA = Path(__file__).parent / "data" / "sep3004"
SET = json.loads((DATA / "vectors.json").read_text(encoding="utf-8"))


def sealed_fixtures() -> dict[str, dict[str, Any]]:
    sealed: dict[str, dict[str, Any]] = {}
    for name, fixture in SET["fixtures"].items():
        record = resolve(copy.deepcopy(fixture), sealed)
        record["event_hash"] = sep3004.event_hash(record)
        sealed[name] = record
    return sealed


def resolve(value: Any, sealed: dict[str, dict[str, Any]]) -> Any:
    if isinstance(value, dict) and set(value) == {"$event_hash_of"}:
        return sealed[value["$event_hash_of"]]["event_hash"]
    if isinstance(value, dict):
        return {key: resolve(item, sealed) for key, item in value.items()}
    return value


def build(reference: dict[str, Any], sealed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if "literal" in reference:
        return dict(resolve(copy.deepcopy(reference["literal"]), sealed))
    record = copy.deepcopy(sealed[reference["fixture"]])
    for edit in reference["edits"]:
        *parents, last = edit["path"]
        target = record
        for key in parents:
            target = target[key]
        if edit["op"] == "delete":
            del target[last]
        else:
            target[last] = edit["value"]
    return record


def problems_of(vector: dict[str, Any], sealed: dict[str, dict[str, Any]]) -> list[str]:
    check = vector["check"]
    if check in ("skeleton", "extensions", "record_hash"):
        record = build(vector["record"], sealed)
        function = {
            "skeleton": sep3004.skeleton_problems,
            "extensions": sep3004.extension_problems,
            "record_hash": sep3004.hash_problems,
        }[check]
        return list(function(record))
    if check in ("same_preimage", "different_preimage"):
        same = sep3004.preimage(build(vector["a"], sealed)) == sep3004.preimage(build(vector["b"], sealed))
        return [] if same == (check == "same_preimage") else [f"{check} does not hold"]
    if check == "kat":
        return [
            f"{answer['fixture']}: known answer differs"
            for answer in vector["known_answers"]
            if sep3004.preimage(sealed[answer["fixture"]]) != answer["preimage"]
            or sealed[answer["fixture"]]["event_hash"] != answer["event_hash"]
        ]
    if check == "chain":
        return sep3004.segment_problems([build(reference, sealed) for reference in vector["records"]])
    if check == "emission":
        records = [build(reference, sealed) for reference in vector["records"]]
        return sep3004.emission_problems(records, vector["required"])
    assert check == "manifest"
    return sep3004.manifest_problems(vector["manifest"])


@pytest.mark.parametrize("vector", SET["vectors"], ids=[vector["id"] for vector in SET["vectors"]])
def test_each_published_vector_gets_the_expected_verdict(vector: dict[str, Any]) -> None:
    problems = problems_of(vector, sealed_fixtures())
    if vector["expect"] == "conformant":
        assert problems == []
    else:
        assert problems, f"{vector['id']} should have been rejected"


def test_the_transcription_holds_every_upstream_vector_and_its_verdict() -> None:
    upstream = (DATA / "upstream-vectors.ts").read_text(encoding="utf-8")
    found = re.findall(
        r"id: '([^']+)',\s*requirement: '([^']+)',\s*title: '((?:[^'\\]|\\.)*)',\s*expect: '(\w+)'", upstream
    )
    assert len(found) == 23
    assert [(v["id"], v["requirement"], v["expect"]) for v in SET["vectors"]] == [
        (i, r, e) for i, r, _, e in found
    ]
    assert "d494769c1ae442ea88dd190068747abf63c0568a3b856f85791b1a50a99d48b4" in upstream
    assert "f733fed9cc757165f810b778e4baba1f51a45504988e937707aaab4361b2f064" in upstream
