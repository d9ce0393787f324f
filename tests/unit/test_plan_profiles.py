"""plan.profiles: which instance profiles `up` makes through IAM's API, from the spec and
the cluster's profiles as observed (name -> the roles each holds)."""

from __future__ import annotations

from clusterkit.plan.profiles import (
    ProfileKind,
    ProfileStep,
    plan_profiles,
    profile_differences,
    profile_name,
)
from clusterkit.spec import loads

BASE = "name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [c5.large]}\n"
EFS = loads(BASE + "storage:\n  efs: {mount: /efs}\n")
NODE, CONTROLLER = (profile_name("t", "us-east-1", k) for k in ProfileKind)


def test_a_new_cluster_with_efs_creates_both_profiles_and_gives_them_roles():
    steps = plan_profiles(EFS, ["us-east-1"], {})
    assert steps == (ProfileStep("us-east-1", ProfileKind.NODE, NODE, True, True),
                     ProfileStep("us-east-1", ProfileKind.CONTROLLER, CONTROLLER, True, True))
    assert [c for s in steps for c in s.calls()] == [
        "CreateInstanceProfile", "AddRoleToInstanceProfile"] * 2


def test_profiles_that_hold_their_roles_need_nothing_and_an_empty_one_its_role():
    seen = {NODE: ("clusterkit-t-NodeRole-X",), CONTROLLER: ()}
    assert plan_profiles(EFS, ["us-east-1"], seen) == (
        ProfileStep("us-east-1", ProfileKind.CONTROLLER, CONTROLLER, False, True),)


def test_a_cluster_without_efs_gets_both_profiles_too():
    """A detached job's controller (a spending cap needs no EFS) wears the controller's
    profile, and gives the master the nodes' back as it exits."""
    assert plan_profiles(loads(BASE), ["us-east-1"], {}) == plan_profiles(
        EFS, ["us-east-1"], {})


def test_each_planned_region_has_its_own_pair():
    steps = plan_profiles(EFS, ["us-east-1", "us-west-2"], {NODE: ("r",), CONTROLLER: ("c",)})
    assert [s.name for s in steps] == ["clusterkit-t-us-west-2-node",
                                       "clusterkit-t-us-west-2-controller"]


def test_a_saved_plan_sees_profiles_that_changed():
    assert profile_differences({NODE: ("r",)}, {NODE: (), CONTROLLER: ()}) == [
        f"instance profile {CONTROLLER} appeared", f"instance profile {NODE} held ['r'], now []"]
