"""aws.teardown against the emulator over HTTP: what a half-deleted stack may leave,
found by the cluster tag (IAM: by path) and deleted; deleting what is already gone is
not an error."""

from __future__ import annotations

import json

import boto3

from clusterkit.aws import teardown
from clusterkit.aws.session import make_session
from tests import support
from tests.integration.conftest import AMI, REGION

ASSUME = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
    "Action": "sts:AssumeRole"}]})


def _tag(cluster: str, kind: str) -> list[dict]:
    return [{"ResourceType": kind, "Tags": [{"Key": "clusterkit:cluster", "Value": cluster}]}]


def test_security_groups_and_launch_templates(moto_env):
    s, cluster = make_session(REGION), support.unique_name("td")
    ec2 = boto3.client("ec2", REGION)
    group = ec2.create_security_group(GroupName=cluster, Description="t",
                                      TagSpecifications=_tag(cluster, "security-group"))
    template = ec2.create_launch_template(
        LaunchTemplateName=cluster, LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=_tag(cluster, "launch-template"))["LaunchTemplate"]
    assert teardown.security_groups(s, REGION, cluster) == [group["GroupId"]]
    assert teardown.launch_templates(s, REGION, cluster) == [template["LaunchTemplateId"]]
    assert teardown.placement_groups(s, REGION, cluster) == []
    teardown.delete_security_group(s, REGION, group["GroupId"])
    teardown.delete_security_group(s, REGION, group["GroupId"])  # gone: no error
    teardown.delete_launch_template(s, REGION, template["LaunchTemplateId"])
    assert teardown.security_groups(s, REGION, cluster) == []
    assert teardown.launch_templates(s, REGION, cluster) == []


def test_file_systems(moto_env):
    s, cluster = make_session(REGION), support.unique_name("td-fs")
    client = boto3.client("efs", REGION)
    kept = client.create_file_system(CreationToken=cluster, Tags=[
        {"Key": "clusterkit:cluster", "Value": cluster},
        {"Key": "clusterkit:retain", "Value": "true"}])["FileSystemId"]
    client.create_file_system(CreationToken=f"{cluster}-other")
    found = teardown.file_systems(s, REGION, cluster)
    assert [(f["id"], f["retain"], f["region"]) for f in found] == [(kept, True, REGION)]
    assert teardown.mount_targets(s, REGION, kept) == []
    teardown.delete_file_system(s, REGION, kept)
    teardown.delete_file_system(s, REGION, kept)  # FileSystemNotFound: no error
    assert teardown.file_systems(s, REGION, cluster) == []


def test_iam_role_and_profile_by_path(moto_env):
    s, cluster = make_session(REGION), support.unique_name("td-iam")
    iam = boto3.client("iam")
    path = teardown.iam_path(cluster)
    role = f"{cluster}-role"
    iam.create_role(RoleName=role, Path=path, AssumeRolePolicyDocument=ASSUME,
                    Tags=[{"Key": "clusterkit:region", "Value": REGION}])
    iam.put_role_policy(RoleName=role, PolicyName="p", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*",
                                                 "Resource": "*"}]}))
    iam.create_instance_profile(InstanceProfileName=f"{cluster}-prof", Path=path)
    iam.add_role_to_instance_profile(InstanceProfileName=f"{cluster}-prof", RoleName=role)
    assert teardown.iam_roles(s, cluster) == [role]
    assert teardown.instance_profiles(s, cluster) == [f"{cluster}-prof"]
    assert teardown.role_region(s, role) == REGION
    assert teardown.profile_roles(s, f"{cluster}-prof") == [role]
    teardown.delete_instance_profile(s, f"{cluster}-prof")
    teardown.delete_role(s, role)
    teardown.delete_role(s, role)  # NoSuchEntity: no error
    assert teardown.iam_roles(s, cluster) == []
    assert teardown.instance_profiles(s, cluster) == []
    assert teardown.role_region(s, role) is None
