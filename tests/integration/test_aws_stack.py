"""aws.stack against the emulator over HTTP: the per-cluster stack created from the
shipped template, read back as plain data, its events, deleted; a stack that does not
exist reads as None / DELETE_COMPLETE, not as an error."""

from __future__ import annotations

import pytest

from clusterkit.aws import keypairs, lookup, stack
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError
from tests import support
from tests.integration.conftest import AMI, REGION


def _params(cluster: str, tmp_path) -> dict[str, str]:
    s = make_session(REGION)
    key = f"clusterkit-{cluster}"
    pub = support.public_key(support.ssh_keygen(tmp_path / "k"))
    keypairs.import_key_pair(s, REGION, key, pub, {"clusterkit:cluster": cluster})
    return {"ClusterName": cluster, "VpcId": lookup.default_vpc(s, REGION), "ImageId": AMI,
            "KeyName": key, "RootVolumeSize": "8", "UsePlacementGroup": "false",
            "SshCidr": "127.0.0.1/32"}


def test_missing_stack(moto_env):
    s = make_session(REGION)
    assert stack.describe_stack(s, REGION, "clusterkit-never-made") is None
    assert stack.stack_record(s, REGION, "clusterkit-never-made")["status"] == "DELETE_COMPLETE"


def test_create_describe_events_delete(moto_env, tmp_path):
    s, cluster = make_session(REGION), support.unique_name("stk")
    name = f"clusterkit-{cluster}"
    stack_id = stack.create_stack(s, REGION, name, _params(cluster, tmp_path),
                                  {"clusterkit:cluster": cluster})
    found = stack.describe_stack(s, REGION, name)
    assert found is not None
    assert (found["name"], found["id"], found["status"]) == (name, stack_id, "CREATE_COMPLETE")
    assert found["parameters"]["ClusterName"] == cluster
    assert found["outputs"]  # security group, launch template, ...
    events = stack.stack_events(s, REGION, stack_id)
    assert events and all({"id", "time", "resource", "status"} <= set(e) for e in events)
    assert stack.stack_record(s, REGION, stack_id)["status"] == "CREATE_COMPLETE"
    stack.delete_stack(s, REGION, name)
    assert stack.describe_stack(s, REGION, name) is None
    assert stack.stack_record(s, REGION, stack_id)["status"] == "DELETE_COMPLETE"


def test_the_stacks_group_lets_all_traffic_in_from_and_out_to_itself(moto_env, tmp_path):
    """EFA's rule, made by the stack in the emulator: every protocol in from the nodes'
    security group and out to it (moto's CloudFormation makes the egress rule through
    the sandbox's gap-fill, sandbox.ec2_gaps)."""
    import boto3

    s, cluster = make_session(REGION), support.unique_name("efa")
    name = f"clusterkit-{cluster}"
    stack.create_stack(s, REGION, name, _params(cluster, tmp_path),
                       {"clusterkit:cluster": cluster})
    group = stack.describe_stack(s, REGION, name)["outputs"]["SecurityGroupId"]
    [described] = boto3.client("ec2", REGION).describe_security_groups(
        GroupIds=[group])["SecurityGroups"]

    def to_itself(rules: list) -> list:
        return [r["IpProtocol"] for r in rules
                if [p["GroupId"] for p in r.get("UserIdGroupPairs", [])] == [group]]

    assert to_itself(described["IpPermissions"]) == ["-1"]
    assert to_itself(described["IpPermissionsEgress"]) == ["-1"]
    stack.delete_stack(s, REGION, name)


def test_create_error_is_translated(moto_env):
    cluster = support.unique_name("stk-bad")
    with pytest.raises(AwsError) as caught:  # required parameters missing
        stack.create_stack(make_session(REGION), REGION, f"clusterkit-{cluster}", {}, {})
    assert caught.value.message.startswith(f"CreateStack on clusterkit-{cluster} failed: ")
    assert caught.value.resource == f"clusterkit-{cluster}"


@pytest.mark.parametrize("hops", ["1", "2"])
def test_launch_template_hop_limit_and_efs_key_follow_the_parameters(moto_env, tmp_path,
                                                                     hops):
    import boto3

    s, cluster = make_session(REGION), support.unique_name("stk-hop")
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]["Arn"]
    params = {**_params(cluster, tmp_path), "MetadataHopLimit": hops, "CreateEfs": "true",
              "EfsDeletionPolicy": "delete", "KmsKeyId": key}
    name = f"clusterkit-{cluster}"
    stack.create_stack(s, REGION, name, params, {"clusterkit:cluster": cluster})
    try:
        outputs = stack.describe_stack(s, REGION, name)["outputs"]
        ec2, efs = boto3.client("ec2", REGION), boto3.client("efs", REGION)
        data = ec2.describe_launch_template_versions(
            LaunchTemplateId=outputs["LaunchTemplateId"])["LaunchTemplateVersions"][0][
            "LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == int(hops)
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        fs = efs.describe_file_systems(FileSystemId=outputs["DeletedFileSystemId"])[
            "FileSystems"][0]
        assert fs["Encrypted"] is True and fs["KmsKeyId"] == key
    finally:
        stack.delete_stack(s, REGION, name)
