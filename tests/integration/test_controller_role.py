"""The recovery controller's role against the emulator over HTTP: the cluster stack
(moto's CloudFormation) makes both roles, the controller's inline policies and its
profile's output, and `up`'s profiles (made through IAM's API: cluster.provision.profiles)
hold them; ``aws.instances.set_instance_profile`` associates, leaves alone or replaces;
the sandbox's metadata then serves the controller role's credentials; deleting the
profiles and the stack (as `down` does) leaves no role or profile of the cluster."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from clusterkit.aws import instances
from clusterkit.aws import stack as cfn
from clusterkit.aws.session import make_session
from clusterkit.cluster.provision import profiles as made_profiles
from clusterkit.cluster.runtime import Runtime
from clusterkit.plan.profiles import ProfileKind, ProfileStep, profile_name
from clusterkit.plan.provision import StackRecord
from clusterkit_sandbox.moto_models import instance_metadata
from tests import support
from tests.integration.conftest import AMI, REGION, stack_params


def _profile(iam: Any, name: str) -> str:
    iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")
    iam.create_instance_profile(InstanceProfileName=name)
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return str(iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"])


def _instance(ec2: Any) -> str:
    return str(ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1,
                                 InstanceType="t3.micro")["Instances"][0]["InstanceId"])


def _associated(ec2: Any, iid: str) -> list[str]:
    found = ec2.describe_iam_instance_profile_associations(Filters=[
        {"Name": "instance-id", "Values": [iid]}])["IamInstanceProfileAssociations"]
    return [a["IamInstanceProfile"]["Arn"] for a in found if a["State"] == "associated"]


def test_set_instance_profile_associates_keeps_or_replaces(moto_env):
    name = support.unique_name("prof")
    iam, ec2 = boto3.client("iam"), boto3.client("ec2", REGION)
    first, second = _profile(iam, f"{name}-a"), _profile(iam, f"{name}-b")
    iid = _instance(ec2)
    s = make_session(REGION)
    assert instances.set_instance_profile(s, REGION, iid, first) is True  # had none
    assert _associated(ec2, iid) == [first]
    assert instances.set_instance_profile(s, REGION, iid, first) is False  # has it
    assert _associated(ec2, iid) == [first]
    assert instances.set_instance_profile(s, REGION, iid, second) is True  # had another
    assert _associated(ec2, iid) == [second]
    assert instance_metadata(iid)["role"] == f"{name}-b"
    ec2.terminate_instances(InstanceIds=[iid])


def _cluster_iam(iam: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(role name -> role, profile name -> profile) under the cluster's path (moto
    lists every profile whatever the PathPrefix)."""
    path = f"/clusterkit/{name}/"
    roles = {r["RoleName"]: r for r in iam.list_roles(PathPrefix=path)["Roles"]
             if r["Path"] == path}
    profiles = {p["InstanceProfileName"]: p for p in
                iam.list_instance_profiles(PathPrefix=path)["InstanceProfiles"]
                if p["Path"] == path}
    return roles, profiles


@pytest.mark.parametrize("efs", [True, False], ids=["efs", "no-efs"])
def test_the_stack_makes_both_roles_and_the_master_can_wear_the_controllers(moto_env, efs):
    name = support.unique_name("ctl")
    iam, ec2 = boto3.client("iam"), boto3.client("ec2", REGION)
    s = make_session(REGION)
    params = {**stack_params(ec2, name), "CreateEfs": "true" if efs else "false",
              "InstanceTypes": "c5.large,c5.xlarge"}
    stack_id = cfn.create_stack(s, REGION, f"clusterkit-{name}", params,
                                {"clusterkit:cluster": name})
    described = cfn.stack_record(s, REGION, stack_id)
    assert described["status"] == "CREATE_COMPLETE", described["reason"]
    record = StackRecord.of(REGION, described)
    assert _cluster_iam(iam, name)[1] == {}  # the stack makes no profile
    rt = Runtime(session=s)
    steps = [ProfileStep(REGION, kind, profile_name(name, REGION, kind), True, True)
             for kind in ProfileKind]
    made_profiles.create(rt, name, steps, REGION)
    made_profiles.add_roles(rt, steps, record)
    assert record.instance_profile and record.controller_profile
    assert record.instance_profile != record.controller_profile

    roles, profiles = _cluster_iam(iam, name)
    assert len(roles) == 2 and len(profiles) == 2, (roles, profiles)
    by_profile = {p["Arn"]: p["Roles"][0]["RoleName"] for p in profiles.values()}
    node_role, controller_role = (by_profile[record.instance_profile],
                                  by_profile[record.controller_profile])
    assert {node_role, controller_role} == set(roles)
    for role in roles:
        tags = {t["Key"]: t["Value"] for t in iam.list_role_tags(RoleName=role)["Tags"]}
        assert tags == {"clusterkit:cluster": name, "clusterkit:region": REGION}
    efs_only = ["efs-client"] if efs else []
    assert iam.list_role_policies(RoleName=node_role)["PolicyNames"] == efs_only
    assert sorted(iam.list_role_policies(RoleName=controller_role)["PolicyNames"]) == \
        sorted([*efs_only, "recovery"])
    recovery = iam.get_role_policy(RoleName=controller_role, PolicyName="recovery")
    doc = recovery["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    passed = [st for st in doc["Statement"] if st["Sid"] == "PassNodeRole"]
    assert passed[0]["Resource"] == roles[node_role]["Arn"]  # the node role, no other
    tagged = [st for st in doc["Statement"] if st["Sid"] == "ClusterInstances"]
    assert tagged[0]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/clusterkit:cluster": name}}
    # launches: the spec's types (the parameter split), IMDSv2, from a launch template;
    # no capacity reservation when the spec names none
    [launch] = [st for st in doc["Statement"] if st["Sid"] == "LaunchInstances"]
    assert launch["Condition"]["StringEquals"] == {
        "aws:RequestTag/clusterkit:cluster": name, "ec2:MetadataHttpTokens": "required",
        "ec2:InstanceType": ["c5.large", "c5.xlarge"]}
    assert launch["Condition"]["Null"] == {"ec2:LaunchTemplate": "false"}
    [using] = [st for st in doc["Statement"] if st["Sid"] == "LaunchWith"]
    resources = [r for r in using["Resource"] if r]  # moto keeps AWS::NoValue as null
    assert f"image/{AMI}" in " ".join(resources) and f"key-pair/{name}" in " ".join(resources)
    assert not any("capacity-reservation" in r for r in resources)

    # `up` gives a node the node profile; the master then wears the controller's
    iid = _instance(ec2)
    assert instances.set_instance_profile(s, REGION, iid, record.instance_profile)
    assert instance_metadata(iid)["role"] == node_role
    assert instances.set_instance_profile(s, REGION, iid, record.controller_profile)
    assert instance_metadata(iid)["role"] == controller_role
    # DescribeInstances shows the profile it wears now (`down` finds a controller by it)
    [node] = instances.describe_nodes(s, REGION, [iid])
    assert node.instance_profile == record.controller_profile
    assert not instances.set_instance_profile(s, REGION, iid, record.controller_profile)
    ec2.terminate_instances(InstanceIds=[iid])

    made_profiles.delete(rt, name, REGION)
    cfn.delete_stack(s, REGION, f"clusterkit-{name}")
    assert cfn.stack_record(s, REGION, stack_id)["status"] == "DELETE_COMPLETE"
    assert _cluster_iam(iam, name) == ({}, {})
