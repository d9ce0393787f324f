"""Console output -> host keys, and the first-contact verdict, as data: every
plan_console_keys/*.json holds the console ``output`` lines, the key a node
``presented``, the keys and fingerprints the parser must find (``console``; the
fingerprints written by ``ssh-keygen -l`` itself, so a match proves clusterkit computes
them as OpenSSH does) and the ``verdict``; ``source`` says where the shape comes from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from clusterkit.cluster.access import console_keys as ck

CASES = sorted((Path(__file__).parent / "plan_console_keys").glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    case = json.loads(path.read_text())
    missing = {"source", "output", "presented", "console", "verdict"} - set(case)
    assert not missing, f"{path.name}: missing {sorted(missing)}"
    return case


def test_the_cases_cover_every_verdict():
    assert len(CASES) >= 10
    assert {load(p)["verdict"] for p in CASES} == {v.value for v in ck.Verdict}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_console_parses_and_verdict(path: Path):
    case = load(path)
    parsed = ck.parse("\n".join(case["output"]))
    assert [dataclasses.asdict(fp) for fp in parsed.fingerprints] == \
        case["console"]["fingerprints"]
    assert list(parsed.keys) == case["console"]["keys"]
    assert parsed.finished is case["console"]["finished"]
    assert ck.verify(case["presented"], parsed).value == case["verdict"]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_a_mismatch_names_the_fingerprints_of_its_type(path: Path):
    case = load(path)
    parsed = ck.parse("\n".join(case["output"]))
    shown = ck.expected(case["presented"], parsed)
    if case["verdict"] != "mismatch":
        return
    kind = ck.key_kind(case["presented"])
    assert shown and all(fp.kind == kind for fp in shown)
    assert ck.sha256_fingerprint(case["presented"]) not in {fp.value for fp in shown}


def test_helpers_on_odd_input():
    key = load(CASES[0])["presented"]
    assert len(ck.sha256_fingerprint(key)) == len("SHA256:") + 43
    assert ck.md5_fingerprint(key).count(":") == 16  # "MD5:" + 16 pairs
    assert ck.key_kind("ecdsa-sha2-nistp384 AAAA") == "ECDSA"
    assert ck.verify("not a key", ck.ConsoleKeys(keys=(key,))) is ck.Verdict.MISMATCH
    assert ck.verify(key, ck.ConsoleKeys(finished=True)) is ck.Verdict.UNPRINTED
