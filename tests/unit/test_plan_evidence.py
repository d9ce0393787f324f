"""plan/evidence.py: whether a node is lost, on evidence only, as data
(tests/unit/plan_evidence/cases.json: one node's facts in, the verdict, its cause and
the words of its evidence out)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from clusterkit.kinds import InstanceState
from clusterkit.plan.evidence import (
    Check,
    Ec2Seen,
    NodeFacts,
    NoticeSeen,
    Verdict,
    decide,
)

DATA = json.loads((Path(__file__).parent / "plan_evidence" / "cases.json").read_text())
CASES = DATA["cases"]


def facts_of(raw: dict[str, Any]) -> NodeFacts:
    ec2 = raw.get("ec2")
    seen = None if ec2 is None else Ec2Seen(
        None if ec2.get("state") is None else InstanceState(ec2["state"]),
        None if ec2.get("check") is None else Check(ec2["check"]))
    notice = raw.get("notice")
    return NodeFacts(2, None if notice is None else NoticeSeen(notice), raw.get("notice_action"),
                     seen, raw.get("silent_s"), tuple(raw.get("noise", ())))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_evidence_cases(case: dict[str, Any]):
    got = decide(facts_of(case["facts"]), case.get("node_timeout", 60.0))
    assert got.index == 2
    assert got.verdict.value == case["verdict"], got.evidence
    assert (got.cause.value if got.cause else None) == case["cause"]
    for words in case["evidence_has"]:
        assert words in got.evidence, (words, got.evidence)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_noise_never_changes_a_verdict(case: dict[str, Any]):
    """Whatever else was seen (failed connections, metadata errors, slow answers), the
    same facts decide the same way."""
    facts = facts_of(case["facts"])
    timeout = case.get("node_timeout", 60.0)
    quiet = decide(dataclasses.replace(facts, noise=()), timeout)
    loud = decide(dataclasses.replace(facts, noise=("ssh refused", "HTTP 500")), timeout)
    assert (quiet.verdict, quiet.cause) == (loud.verdict, loud.cause)


def test_every_verdict_and_lost_state_has_a_case():
    verdicts = {c["verdict"] for c in CASES}
    states = {c["facts"]["ec2"]["state"] for c in CASES
              if c["facts"].get("ec2") and c["verdict"] == "lost" and c["cause"] == "gone"}
    assert verdicts == {v.value for v in Verdict}
    assert states >= {"stopping", "stopped", "shutting-down", "terminated", None}
