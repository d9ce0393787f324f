"""plan.applycalls and plan.applied, as data (tests/unit/saved_plan_cases/): each case is
a saved plan (``UpPlan.to_wire``) with its spec, and the AWS writes apply makes for it
when the first candidate has capacity. The plan reads back whole (``from_wire`` then
``to_wire`` gives the file again) and `plan` shows every one of those writes.
tests/integration/test_up_plan_apply.py holds `up`'s real calls to the same function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterkit.plan.applycalls import apply_calls
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import UpPlan
from clusterkit.plan.wire import WireError
from clusterkit.spec import loads

CASES = sorted((Path(__file__).parent / "saved_plan_cases").glob("*.json"))
# what `plan` says for each write (a line containing the text)
SHOWN = {"ImportKeyPair": "import your SSH public key", "CreateStack": "stack in ",
         "UpdateStack": "update the stack", "TerminateInstances": "terminate ",
         "StartInstances": "start ", "RunInstances": "launch ",
         "CreateTags": "role tag", "CreateMountTarget": "EFS mount target",
         "ModifyMountTargetSecurityGroups": "lent to the cluster",
         "AssociateIamInstanceProfile": "instance profile",
         "CreateInstanceProfile": "create through IAM's API",
         "AddRoleToInstanceProfile": "added once the stack is complete"}


def _case(path: Path) -> tuple[dict, UpPlan]:
    data = json.loads(path.read_text())
    return data, UpPlan.from_wire(data["plan"], loads(data["spec"]))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_a_saved_plan_reads_back_whole(case: Path):
    data, plan = _case(case)
    assert json.loads(json.dumps(plan.to_wire())) == data["plan"]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_the_calls_apply_makes(case: Path):
    data, plan = _case(case)
    assert dict(apply_calls(plan)) == data["calls"]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_plan_shows_each_write(case: Path):
    data, plan = _case(case)
    text = "\n".join(plan_lines(plan))
    for operation in data["calls"]:
        assert SHOWN[operation] in text, operation


def test_fallback_regions_are_shown_with_their_parameters():
    _, plan = _case(Path(__file__).parent / "saved_plan_cases" / "fallback-region.json")
    text = "\n".join(plan_lines(plan))
    assert "if the launch falls back to us-west-2: import your SSH public key" in text
    assert "if the launch falls back to us-west-2: stack in us-west-2: create" in text
    assert "NodeRole" not in text.split("stack calls run")[0]  # the role's, said apart
    assert "the stack calls run as the service role arn:aws:iam::123456789012:role/" in text


def test_a_damaged_plan_names_the_field():
    data, _ = _case(CASES[0])
    data["plan"]["nodes"]["launch"] = "zero"
    with pytest.raises(WireError, match="NodeActions.launch"):
        UpPlan.from_wire(data["plan"], loads(data["spec"]))
