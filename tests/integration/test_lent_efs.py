"""A file system of yours (``storage.efs.file_system_id``) against moto in server mode
(real HTTP): `up` lends its mount target in the nodes' AZ (the cluster's security group
added, no new mount target: a minute of AWS's saved) or makes one where it has none,
`down` gives the one back and deletes the other, and a file system not tagged
``clusterkit:lend=true`` is refused before anything is made. The emulator refuses to
delete a security group a mount target still holds (ec2_gaps), as EC2 does. SSH waiting
is off (moto's nodes have no sshd)."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError
from tests import support
from tests.integration.conftest import REGION, Calls, leftovers, runtime, write_spec


def _your_file_system(lend: bool, azs: tuple[str, ...]) -> tuple[str, str, dict[str, str]]:
    """A file system made outside clusterkit, in a group of yours, with a mount target
    in each of ``azs``: (its id, your group, subnet -> mount target id)."""
    ec2, efs = boto3.client("ec2", REGION), boto3.client("efs", REGION)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    group = ec2.create_security_group(GroupName=support.unique_name("yours"),
                                      Description="yours", VpcId=vpc["VpcId"])["GroupId"]
    tags = [{"Key": "clusterkit:lend", "Value": "true"}] if lend else []
    fs_id = efs.create_file_system(CreationToken=support.unique_name("fs"),
                                   Tags=tags)["FileSystemId"]
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])["Subnets"]}
    targets = {subnets[az]: efs.create_mount_target(
        FileSystemId=fs_id, SubnetId=subnets[az], SecurityGroups=[group])["MountTargetId"]
        for az in azs}
    return fs_id, group, targets


def _groups(targets: dict[str, str]) -> dict[str, list[str]]:
    efs = boto3.client("efs", REGION)
    return {subnet: efs.describe_mount_target_security_groups(MountTargetId=mt)[
        "SecurityGroups"] for subnet, mt in targets.items()}


def _spec(tmp_path, name: str, fs_id: str):
    return write_spec(tmp_path, name=name, count=1, extra=(
        f"storage:\n  efs: {{mount: /efs, file_system_id: {fs_id}}}\n"))


def _node_subnet(cluster: str) -> str:
    res = boto3.client("ec2", REGION).describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    (inst,) = [i for r in res["Reservations"] for i in r["Instances"]]
    return inst["SubnetId"]


def test_your_mount_target_is_lent_and_given_back(calls: Calls, tmp_path, capsys):
    azs = tuple(f"{REGION}{z}" for z in "abcdef")
    fs_id, yours, targets = _your_file_system(True, azs)
    spec = _spec(tmp_path, "lend", fs_id)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    made = calls.mutating()
    assert made.get("ModifyMountTargetSecurityGroups") == 1 and "CreateMountTarget" not in made
    (cluster_group,) = leftovers("lend")["security_groups"]
    subnet = _node_subnet("lend")
    groups = _groups(targets)
    assert groups[subnet] == [yours, cluster_group]
    assert all(g == [yours] for s, g in groups.items() if s != subnet)
    assert "lent" in capsys.readouterr().err

    calls.reset()
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {}  # lent once

    do_down("lend", yes=True, rt=runtime())
    assert _groups(targets) == {s: [yours] for s in targets}  # given back, none deleted
    assert leftovers("lend") == {}
    (fs,) = boto3.client("efs", REGION).describe_file_systems(FileSystemId=fs_id)["FileSystems"]
    assert fs["LifeCycleState"] == "available"


def test_a_mount_target_made_on_your_file_system_is_deleted_by_down(calls: Calls, tmp_path):
    fs_id, _, _ = _your_file_system(True, ())
    spec = _spec(tmp_path, "lendnew", fs_id)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating().get("CreateMountTarget") == 1
    efs = boto3.client("efs", REGION)
    (target,) = efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]
    assert target["SubnetId"] == _node_subnet("lendnew")
    do_down("lendnew", yes=True, rt=runtime())
    assert efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"] == []
    assert leftovers("lendnew") == {}  # the group went: the target no longer held it


def test_an_untagged_file_system_of_yours_is_refused_before_anything_is_made(
        calls: Calls, tmp_path):
    fs_id, yours, targets = _your_file_system(False, (f"{REGION}a",))
    with pytest.raises(ClusterkitError) as refused:
        do_up(str(_spec(tmp_path, "nolend", fs_id)), yes=True, rt=runtime(calls),
              wait_ssh=False)
    assert f"{fs_id}" in refused.value.message
    assert "not tagged clusterkit:lend=true" in refused.value.message
    assert "aws efs tag-resource" in refused.value.message
    assert calls.mutating() == {} and leftovers("nolend") == {}
    assert _groups(targets) == {s: [yours] for s in targets}
