"""plan.down: what `down` deletes, as data (tests/unit/plan_down_cases: one observation
in, the plan and the lines `down` shows out) and the check of its instances after the
question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterkit.plan.down import (
    DownObserved,
    IamNames,
    IamSeen,
    KeptEfs,
    RegionSeen,
    Resource,
    Verdict,
    instance_drift,
    plan_down,
    plan_iam,
)

CASES = sorted((Path(__file__).parent / "plan_down_cases").glob("*.json"))


def _region(region: str, seen: dict[str, Any]) -> RegionSeen:
    """A case's region: resource words -> ids, plus "ending" and "kept_efs"."""
    seen = dict(seen)
    ending = frozenset(seen.pop("ending", ()))
    kept = tuple(KeptEfs(region=region, **fs) for fs in seen.pop("kept_efs", ()))
    return RegionSeen(region, {Resource(k): tuple(v) for k, v in seen.items()}, kept, ending)


def observed(data: dict[str, Any]) -> DownObserved:
    iam = data["iam"]
    return DownObserved(data["cluster"], tuple(data["searched"]),
                        tuple(_region(r, seen) for r, seen in data["regions"].items()),
                        data["record"],
                        None if iam is None else IamNames(tuple(iam["roles"]),
                                                          tuple(iam["profiles"])))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_planning_cases(case: Path):
    """Planning as data: one observation of the cluster in every region searched in,
    the deletions (in order), what is kept, the verdict and the lines shown out."""
    data = json.loads(case.read_text())
    plan = plan_down(observed(data["observed"]), data["delete_efs"])
    want = data["plan"]
    assert (plan.verdict, plan.todo) == (Verdict(want["verdict"]), want["todo"])
    assert [(r, list(kinds.items())) for r, kinds in plan.deleted().items()] == \
        [(r, list(kinds.items())) for r, kinds in want["deletions"].items()]  # order too
    assert {r.region: list(r.file_systems) for r in plan.regions} == want["file_systems"]
    assert {r.region: sorted(r.ending) for r in plan.regions if r.ending} == \
        want.get("ending", {})
    assert [fs.id for fs in plan.kept_efs] == want["kept_efs"]
    assert (plan.summary(), plan.question()) == (want["summary"], want["question"])
    assert plan.lines() == want["lines"]


def test_every_case_folder_entry_is_a_case_and_every_kind_is_covered():
    assert len(CASES) >= 6
    seen = {k for case in CASES for r in json.loads(case.read_text())["observed"][
        "regions"].values() for k in r}
    assert {k.value for k in Resource} - {Resource.KEPT_EFS.value} <= seen


def test_kept_efs_is_priced_as_status_shows_it():
    fs = KeptEfs("fs-1", "us-east-1", 2_500_000_000, "2026-01-01")
    assert fs.priced() == {"id": "fs-1", "region": "us-east-1", "created": "2026-01-01",
                           "size_gb": 2.5, "usd_per_month": 0.75}
    assert fs.describe() == "fs-1 in us-east-1: 2.500 GB, $0.75/month"


def _plan(instances: tuple[str, ...], ending: tuple[str, ...] = ()):
    seen = RegionSeen("us-east-1", {Resource.INSTANCES: instances} if instances else
                      {Resource.STACK: ("clusterkit-t",)}, ending=frozenset(ending))
    return plan_down(DownObserved("t", ("us-east-1",), (seen,), True), False)


def test_instances_that_appeared_or_vanished_after_the_question_are_named():
    plan = _plan(("i-1", "i-2"))
    assert instance_drift(plan, {"us-east-1": ["i-1", "i-2"]}) == []
    assert instance_drift(plan, {"us-east-1": ["i-2", "i-3"]}) == [
        "instance i-3 in us-east-1 appeared (not in the plan)",
        "instance i-1 in us-east-1 is gone"]


def test_a_node_launched_where_the_plan_had_none_is_a_change():
    plan = _plan(())
    assert instance_drift(plan, {"us-east-1": ["i-9"]}) == [
        "instance i-9 in us-east-1 appeared (not in the plan)"]


def test_a_node_that_was_shutting_down_may_be_gone():
    plan = _plan(("i-1", "i-2"), ending=("i-2",))
    assert instance_drift(plan, {"us-east-1": ["i-1"]}) == []
    assert instance_drift(plan, {"us-east-1": []}) == ["instance i-1 in us-east-1 is gone"]


def test_iam_goes_once_no_stack_uses_it():
    """A role tagged with its stack's region goes once that stack is gone; a profile goes
    with its roles; an untagged role (or a profile without one) only once no region has
    the stack, so every enabled region is searched for it."""
    seen = IamSeen({"r-east": "us-east-1", "r-west": "us-west-2"},
                   {"p-east": ("r-east",), "p-west": ("r-west",)})
    assert seen.stack_regions() == ["us-east-1", "us-west-2"]
    iam = plan_iam(seen, live={"us-west-2"})
    assert (iam.profiles, iam.roles) == (("p-east",), ("r-east",))
    assert iam.kept == ("instance profile p-west", "IAM role r-west")

    old = IamSeen({"r-old": None}, {"p-bare": ()})
    assert old.stack_regions() == []  # every enabled region
    assert plan_iam(old, live={"eu-west-1"}).kept == ("instance profile p-bare",
                                                      "IAM role r-old")
    gone = plan_iam(old, live=set())
    assert (gone.profiles, gone.roles, gone.kept) == (("p-bare",), ("r-old",), ())
    assert not IamSeen({}, {})


def test_a_controller_runs_where_the_master_wears_its_profile():
    """The controller's profile by its name as `up` makes it (plan.profiles, the name the
    stack's ControllerProfileArn output gives), or as an older clusterkit's stack made it
    (<stack>-<logical id>-<suffix>, under the cluster's path); the nodes' profile, none,
    or a profile whose path alone says Controller are not it."""
    from clusterkit.aws.stack import template_body
    from clusterkit.plan.down import controller_hosts
    from clusterkit.plan.profiles import ProfileKind, profile_name

    named = profile_name("${ClusterName}", "${AWS::Region}", ProfileKind.CONTROLLER)
    assert f"instance-profile/clusterkit/${{ClusterName}}/{named}\"" in template_body()
    made = "arn:aws:iam::123456789012:instance-profile/clusterkit/r/" + profile_name(
        "r", "us-east-1", ProfileKind.CONTROLLER)
    assert controller_hosts({"i-9": made, "i-8": made.replace("-controller", "-node")}) == [
        "i-9"]

    arn = "arn:aws:iam::123456789012:instance-profile/clusterkit/{}/clusterkit-{}-{}-AB12"
    assert controller_hosts({
        "i-0": arn.format("r", "r", "ControllerInstanceProfile"),
        "i-1": arn.format("r", "r", "NodeInstanceProfile"), "i-2": None,
        "i-3": arn.format("ControllerInstanceProfile", "x", "NodeInstanceProfile")}) == ["i-0"]
