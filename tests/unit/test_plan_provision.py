"""plan/provision.py: the outputs a launch needs, read from the events of a stack still
being created, and the stack record's views of its outputs."""

from __future__ import annotations

from typing import Any

import pytest

from clusterkit.plan.provision import StackRecord, launch_needs, launch_outputs

PARAMS = {"UsePlacementGroup": "true", "CreateEfs": "true", "EfsDeletionPolicy": "delete",
          "ExistingFileSystemId": ""}
PHYSICAL = {"NodeSecurityGroup": "sg-1", "ClusterPlacementGroup": "clusterkit-pg",
            "NodeLaunchTemplate": "lt-1", "EfsDeleted": "fs-1", "EfsRetained": "fs-2",
            "NodeRole": "role-1", "NodeInstanceProfile": "profile-1"}


def _events(*complete: str, started: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out = [{"resource": r, "status": "CREATE_IN_PROGRESS", "physical": ""}
           for r in (*started, *complete)]
    return out + [{"resource": r, "status": "CREATE_COMPLETE", "physical": PHYSICAL[r]}
                  for r in complete]


@pytest.mark.parametrize(("params", "needs"), [
    (PARAMS, ("NodeLaunchTemplate", "NodeSecurityGroup", "ClusterPlacementGroup",
              "EfsDeleted")),
    ({**PARAMS, "EfsDeletionPolicy": "retain"},
     ("NodeLaunchTemplate", "NodeSecurityGroup", "ClusterPlacementGroup", "EfsRetained")),
    ({**PARAMS, "UsePlacementGroup": "false", "CreateEfs": "false"},
     ("NodeLaunchTemplate", "NodeSecurityGroup")),
])
def test_a_launch_needs_the_template_and_what_it_names_never_the_profile(params, needs):
    assert launch_needs(params) == needs
    assert "NodeInstanceProfile" not in launch_needs(params)


def test_outputs_come_once_every_needed_resource_is_complete():
    assert launch_outputs(PARAMS, []) is None
    assert launch_outputs(PARAMS, _events("NodeSecurityGroup", "ClusterPlacementGroup",
                                          started=("NodeLaunchTemplate", "EfsDeleted"))) is None
    # the template done, the file system not yet: the mount target needs it
    assert launch_outputs(PARAMS, _events("NodeSecurityGroup", "ClusterPlacementGroup",
                                          "NodeLaunchTemplate")) is None
    ready = launch_outputs(PARAMS, _events(
        "NodeSecurityGroup", "ClusterPlacementGroup", "NodeLaunchTemplate", "EfsDeleted",
        "NodeRole", started=("NodeInstanceProfile",)))
    assert ready == {"LaunchTemplateId": "lt-1", "SecurityGroupId": "sg-1",
                     "PlacementGroupName": "clusterkit-pg", "DeletedFileSystemId": "fs-1"}
    record = StackRecord("us-east-1", "stack-1", "vpc-1", ready)
    assert (record.launch_template_id, record.security_group, record.placement_group,
            record.efs_id, record.instance_profile) == (
        "lt-1", "sg-1", "clusterkit-pg", "fs-1", "")


def test_a_kept_file_system_comes_from_the_parameters():
    params = {**PARAMS, "CreateEfs": "false", "UsePlacementGroup": "false",
              "ExistingFileSystemId": "fs-0123456789abcdef0"}
    ready = launch_outputs(params, _events("NodeSecurityGroup", "NodeLaunchTemplate"))
    assert ready == {"LaunchTemplateId": "lt-1", "SecurityGroupId": "sg-1",
                     "ExistingFileSystemId": "fs-0123456789abcdef0"}


def test_a_failed_resource_is_not_ready():
    events = _events("NodeSecurityGroup", "ClusterPlacementGroup", "EfsDeleted")
    events.append({"resource": "NodeLaunchTemplate", "status": "CREATE_FAILED",
                   "physical": ""})
    assert launch_outputs(PARAMS, events) is None


def test_the_controller_profile_is_its_output_or_empty():
    outputs = {"LaunchTemplateId": "lt-1", "InstanceProfileArn": "arn:node",
               "ControllerProfileArn": "arn:controller"}
    record = StackRecord("us-east-1", "stack-1", "vpc-1", outputs)
    assert (record.instance_profile, record.controller_profile) == ("arn:node",
                                                                   "arn:controller")
    older = {k: v for k, v in outputs.items() if k != "ControllerProfileArn"}
    assert StackRecord("us-east-1", "stack-1", "vpc-1", older).controller_profile == ""
    assert StackRecord.of("us-east-1", None).controller_profile == ""
