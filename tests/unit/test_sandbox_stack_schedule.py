"""sandbox.stack_schedule: when CloudFormation would create and delete each resource of
the cluster's stack (dependencies from Ref, GetAtt, Sub and DependsOn; Fn::If by its
condition), and the critical path the timed sandbox keeps a stack in progress for."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterkit_sandbox.stack_schedule import (
    Step,
    create_schedule,
    critical_path,
    delete_schedule,
    dependencies,
    references,
)
from clusterkit_sandbox.timed_cfn import marks
from clusterkit_sandbox.timings import WAITS, Timings, Wait

TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "cluster.yaml"
FIGURE = {"A": 1.0, "B": 10.0, "C": 100.0}


def _seconds(kind: str) -> float:
    return FIGURE[kind]


def test_references_in_every_intrinsic_form():
    body = {"a": {"Ref": "X"}, "b": {"Fn::GetAtt": ["Y", "Arn"]}, "c": {"Fn::GetAtt": "Z.Id"},
            "d": {"Fn::Sub": "arn:${AWS::Partition}:${W}/${V.Arn}"},
            "e": {"Fn::Sub": ["${U}-${x}", {"x": {"Ref": "T"}}]},
            "f": [{"Fn::If": ["Yes", {"Ref": "S"}, {"Ref": "R"}]}]}
    found = references(body, condition=lambda name: name == "Yes")
    assert found == {"X", "Y", "Z", "AWS::Partition", "W", "V", "U", "x", "T", "S"}
    assert "R" in references(body, condition=lambda _name: False)


def test_dependencies_only_name_resources_of_the_template():
    resources = {"Role": {"Type": "A", "Properties": {"P": {"Ref": "AWS::Region"}}},
                 "Profile": {"Type": "A", "Properties": {"Roles": [{"Ref": "Role"}]}},
                 "Late": {"Type": "A", "DependsOn": "Profile"},
                 "Both": {"Type": "A", "DependsOn": ["Role", "Gone"],
                          "Properties": {"X": {"Ref": "Param"}}}}
    assert dependencies(resources) == {"Role": set(), "Profile": {"Role"},
                                       "Late": {"Profile"}, "Both": {"Role"}}


def test_independent_resources_start_together_and_a_chain_adds_up():
    resources = {"c": {"Type": "C"}, "b": {"Type": "B", "Properties": {"x": {"Ref": "a"}}},
                 "a": {"Type": "A"}, "d": {"Type": "A", "DependsOn": ["b", "c"]}}
    steps = {s.logical_id: s for s in create_schedule(resources, _seconds)}
    assert (steps["a"].start, steps["a"].end) == (0.0, 1.0)
    assert (steps["b"].start, steps["b"].end) == (1.0, 11.0)
    assert (steps["c"].start, steps["c"].end) == (0.0, 100.0)
    assert steps["d"].start == 100.0 and critical_path(list(steps.values())) == 101.0
    order = [s.logical_id for s in create_schedule(resources, _seconds)]
    assert order.index("a") < order.index("b") < order.index("d")


def test_deleting_goes_the_other_way_round():
    resources = {"a": {"Type": "A"}, "b": {"Type": "B", "Properties": {"x": {"Ref": "a"}}}}
    steps = {s.logical_id: s for s in delete_schedule(resources, _seconds)}
    assert (steps["b"].start, steps["b"].end) == (0.0, 10.0)
    assert (steps["a"].start, steps["a"].end) == (10.0, 11.0)


def test_a_cycle_is_broken_not_looped_on():
    resources = {"a": {"Type": "A", "DependsOn": "b"}, "b": {"Type": "A", "DependsOn": "a"}}
    assert len(create_schedule(resources, _seconds)) == 2


def _cluster_stack(conditions: dict[str, bool]) -> dict:
    from moto.cloudformation.models import Stack

    template = Stack.parse_template(TEMPLATE.read_text())
    return {name: body for name, body in template["Resources"].items()
            if conditions.get(body.get("Condition", ""), True)}


@pytest.mark.parametrize("efs", [True, False])
def test_the_cluster_stack_holds_no_instance_profile_and_the_launch_template_waits_for_no_role(
        efs: bool):
    """The profiles are made through IAM's API (plan.profiles): the stack's longest chain
    is the file system, the role naming it and the controller's policy naming the role,
    seconds where a profile took two minutes."""
    conditions = {"PlacementGroupWanted": True, "EfsWanted": efs, "EfsDelete": efs,
                  "EfsRetain": False, "EfsExisting": False, "EfsAccess": efs,
                  "KmsKeyGiven": False, "NodeRoleBounded": False}
    timed = Timings(1.0)
    steps = {s.logical_id: s for s in create_schedule(
        _cluster_stack(conditions), timed.stack_create, conditions.get)}
    assert not any(s.resource_type == "AWS::IAM::InstanceProfile" for s in steps.values())
    role, template = steps["NodeRole"], steps["NodeLaunchTemplate"]
    # the launch template names the security group and placement group: `up` launches on
    # it while the roles are still being made
    assert template.start == max(steps["NodeSecurityGroup"].end,
                                  steps["ClusterPlacementGroup"].end)
    assert template.end < role.end
    efs_wait = WAITS[Wait.STACK_EFS].seconds if efs else 0.0  # the role's policy names it
    assert role.start == efs_wait and ("EfsDeleted" in steps) is efs
    # the controller's role beside the nodes', never after it: its policy naming the
    # node role is a resource of its own, made once both roles are
    controller, policy = steps["ControllerRole"], steps["ControllerPolicy"]
    assert (controller.start, controller.end) == (role.start, role.end)
    assert policy.start == role.end
    path = efs_wait + WAITS[Wait.STACK_IAM_ROLE].seconds + WAITS[Wait.STACK_OTHER].seconds
    assert critical_path(list(steps.values())) == path
    gone = delete_schedule(_cluster_stack(conditions), lambda _k: timed.stack_delete(),
                           conditions.get)
    assert critical_path(gone) == (2 + efs) * WAITS[Wait.STACK_DELETE].seconds  # policy, role


def test_marks_end_a_resource_before_the_one_waiting_for_it_starts():
    steps = [Step("a", "A", 0.0, 1.0), Step("b", "B", 1.0, 11.0), Step("c", "C", 0.0, 1.0)]
    assert [(at, ends, s.logical_id) for at, ends, s in marks(steps)] == [
        (0.0, False, "a"), (0.0, False, "c"), (1.0, True, "a"), (1.0, True, "c"),
        (1.0, False, "b"), (11.0, True, "b")]
