"""The timed sandbox's other waits, each seen through the AWS API and recorded in
run/timeline.jsonl, on a daemon of its own (`do_start(where, TABLE)`):

- the cluster's stack is CREATE_IN_PROGRESS, without outputs, for the critical path of
  its resources (EFS, then the role naming it, then the controller's policy naming the
  role; the launch template long before), each resource's events in
  DescribeStackEvents; clusterkit's own wait_stack and delete follow it to the end;
- an instance profile made or given its role through IAM's API is refused by EC2's
  AssociateIamInstanceProfile until IAM's propagation is over;
- a snapshot is pending, a volume from it creating (attaching it meanwhile is refused),
  an attachment attaching, a dataset clone made by RunInstances creating; the node shows
  a volume's device only when its wait is over;
- an EFS file system and a mount target are creating;

and the untimed sandbox still makes each of them at once, with no wait recorded.
Asserts hold lower bounds from the one table (never an upper bound on wall time)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from clusterkit.aws import stack as cfn
from clusterkit.cluster.provision import stackops
from clusterkit.cluster.runtime import Runtime
from clusterkit.events import Event, Kind
from clusterkit.plan.provision import launch_outputs
from clusterkit_sandbox import credentials
from clusterkit_sandbox.control import do_start, do_stop
from clusterkit_sandbox.disks import ebs_link_name
from clusterkit_sandbox.stack_schedule import create_schedule, critical_path
from clusterkit_sandbox.state import CAPS_FILE, NODES_FILE, RUN_DIR, read_json
from clusterkit_sandbox.timed import TIMELINE_FILE, read_timeline
from clusterkit_sandbox.timed_cfn import STACK_CREATED, STACK_DELETED
from clusterkit_sandbox.timings import WAITS, Figure, Timings, Wait
from tests import support
from tests.integration.conftest import stack_params

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
SCALE = 0.03  # the stack 4.4 s, a snapshot 5.4 s, a mount target 1.8 s, an attach 0.21 s
# A volume from a snapshot is `creating` for 3 s here, not AWS's 5 s scaled (0.15 s): the
# test attaches it meanwhile, one call after creating it, and must be refused even when a
# loaded machine holds that call back.
# So is an instance profile's propagation (6 s, not 0.3 s): associated one call after its
# role is added (the instance is launched before), it must be refused even on a loaded
# machine (CI: 3 s was once outlasted when RunInstances still stood between them).
TABLE = Timings(SCALE, waits=MappingProxyType({**WAITS, Wait.VOLUME_FROM_SNAPSHOT: Figure(
    100.0, "this test's own: long enough to attach while it lasts"),
    Wait.IAM_PROFILE_PROPAGATION: Figure(200.0, "this test's own: long enough to "
                                                "associate while it lasts")}))
REGION = "us-east-1"
AMI = "ami-12c6146b"


def _scaled(wait: Wait) -> float:
    return TABLE.wait(wait)


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    where = tmp_path_factory.mktemp("timed") / "state"
    status = do_start(where, TABLE)
    try:
        yield where, status["endpoint"]
    finally:
        do_stop(where)


def _client(where: Path, endpoint: str, service: str) -> Any:
    return credentials.client(where, service, endpoint, REGION)


def _waits(where: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(w["what"], w["resource"]): w
            for w in read_timeline(where / RUN_DIR / TIMELINE_FILE) if w["kind"] == "wait"}


def _first_seen(check: Any, what: str) -> float:
    """When ``check`` first held, polling: at or after the moment it became so."""
    support.wait_for(check, what, timeout=60, interval=0.01)
    return time.time()


def _stack_resources_path() -> float:
    from moto.cloudformation.models import Stack

    resources = Stack.parse_template(cfn.template_body())["Resources"]
    held = {"EfsWanted", "EfsDelete", "EfsAccess"}  # CreateEfs, deleted with the stack
    wanted = {k: v for k, v in resources.items() if v.get("Condition") in (None, *held)}
    return critical_path(create_schedule(wanted, Timings(SCALE).stack_create, held.__contains__))


def test_the_stack_is_in_progress_for_its_critical_path(timed, monkeypatch) -> None:
    where, endpoint = timed
    support.sandbox_aws_env(monkeypatch, where, REGION)
    name = support.unique_name("ts")
    stack = f"clusterkit-{name}"
    session = boto3.Session(region_name=REGION)
    params = stack_params(_client(where, endpoint, "ec2"), name)
    stack_id = cfn.create_stack(session, REGION, stack, params, {"clusterkit:cluster": name})
    now = cfn.stack_record(session, REGION, stack_id)
    assert now["status"] == "CREATE_IN_PROGRESS" and now["outputs"] == {}
    events: list[Event] = []
    rt = Runtime(session=session, report=events.append, poll=0.05)
    seen: set[str] = set()
    # what a launch needs comes while the roles are still being made
    early, ready = stackops.wait_ready(rt, REGION, stack_id, timeout=120, seen=seen,
                                      early=functools.partial(launch_outputs, params))
    assert early["status"] == "CREATE_IN_PROGRESS" and ready is not None
    pending = {(e["resource"], e["status"]) for e in cfn.stack_events(session, REGION,
                                                                    stack_id)}
    assert ("ControllerPolicy", "CREATE_COMPLETE") not in pending
    done = stackops.wait_stack(rt, REGION, stack_id, timeout=120, seen=seen)
    assert done["status"] == "CREATE_COMPLETE"
    assert {"LaunchTemplateId", "InstanceProfileArn", "ControllerProfileArn", "NodeRoleName",
            "ControllerRoleName", "DeletedFileSystemId"} <= set(done["outputs"])
    assert {k: done["outputs"][k] for k in ready} == ready  # the events named them right
    stack_events = {(e["resource"], e["status"]) for e in cfn.stack_events(session, REGION,
                                                                          stack_id)}
    for logical in ("EfsDeleted", "NodeRole", "NodeLaunchTemplate", "ControllerRole",
                    "ControllerPolicy"):
        assert {(logical, "CREATE_IN_PROGRESS"), (logical, "CREATE_COMPLETE")} <= stack_events
    said = [e.text for e in events if e.kind is Kind.PROGRESS]  # wait_stack reported them
    assert any("NodeRole" in t and "CREATE_COMPLETE" in t for t in said), said
    waits = _waits(where)
    role = waits[(Wait.STACK_IAM_ROLE.value, f"{stack}/NodeRole")]
    policy = waits[(Wait.STACK_OTHER.value, f"{stack}/ControllerPolicy")]
    efs = waits[(Wait.STACK_EFS.value, f"{stack}/EfsDeleted")]
    assert role["end"] - role["start"] >= _scaled(Wait.STACK_IAM_ROLE) - 0.01
    assert policy["start"] >= role["end"] - 0.01 and role["start"] >= efs["end"] - 0.01
    # the controller's role is made beside the nodes', not after it
    beside = waits[(Wait.STACK_IAM_ROLE.value, f"{stack}/ControllerRole")]
    assert beside["start"] < role["end"] and role["start"] < beside["end"]
    whole = waits[(STACK_CREATED, stack)]
    assert whole["end"] - whole["start"] >= _stack_resources_path() - 0.01
    assert stackops.delete(rt, REGION, stack, timeout=120) == "DELETE_COMPLETE"
    gone = _waits(where)[(STACK_DELETED, stack)]
    # policy, role, file system (the role names it): the longest chain of deletions
    assert gone["end"] - gone["start"] >= 3 * _scaled(Wait.STACK_DELETE) - 0.01


def _volume(ec2: Any, volume_id: str) -> dict[str, Any]:
    return ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"][0]


def _attachment_state(ec2: Any, volume_id: str) -> str:
    return next((a["State"] for a in _volume(ec2, volume_id)["Attachments"]), "")


def _device(where: Path, instance_id: str, volume_id: str) -> Path:
    return where / RUN_DIR / "nodes" / instance_id / "disk" / "by-id" / ebs_link_name(volume_id)


def _completed_snapshot(ec2: Any, where: Path) -> str:
    scratch = ec2.create_volume(Size=1, AvailabilityZone=f"{REGION}a")["VolumeId"]
    called = time.time()
    snap = ec2.create_snapshot(VolumeId=scratch)
    assert snap["State"] == "pending"
    seen = _first_seen(lambda: ec2.describe_snapshots(SnapshotIds=[snap["SnapshotId"]])[
        "Snapshots"][0]["State"] == "completed", "snapshot completed")
    assert seen - called >= _scaled(Wait.SNAPSHOT_COMPLETE)
    line = _waits(where)[(Wait.SNAPSHOT_COMPLETE.value, snap["SnapshotId"])]
    assert line["end"] - line["start"] >= _scaled(Wait.SNAPSHOT_COMPLETE) - 0.01
    return str(snap["SnapshotId"])


def _launch_with_clone(ec2: Any, where: Path, snapshot: str) -> tuple[str, str]:
    name = support.unique_name("tv")
    ec2.create_key_pair(KeyName=name)
    called = time.time()
    (inst,) = ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, KeyName=name,
        BlockDeviceMappings=[{"DeviceName": "/dev/sdf", "Ebs": {"SnapshotId": snapshot}}],
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": "clusterkit:cluster", "Value": name}]}])[
        "Instances"]
    iid = inst["InstanceId"]
    (clone,) = [v for v in ec2.describe_volumes(Filters=[{
        "Name": "attachment.instance-id", "Values": [iid]}])["Volumes"]
        if v.get("SnapshotId") == snapshot]
    seen = _first_seen(lambda: _attachment_state(ec2, clone["VolumeId"]) == "attached",
                       "launch clone attached")
    assert seen - called >= _scaled(Wait.VOLUME_FROM_SNAPSHOT)
    assert (Wait.VOLUME_FROM_SNAPSHOT.value, clone["VolumeId"]) in _waits(where)
    return iid, str(clone["VolumeId"])


def test_volumes_and_snapshots_wait_and_the_node_sees_a_device_only_then(timed) -> None:
    where, endpoint = timed
    ec2 = _client(where, endpoint, "ec2")
    snapshot = _completed_snapshot(ec2, where)
    iid, clone = _launch_with_clone(ec2, where, snapshot)
    called = time.time()
    vol = ec2.create_volume(Size=1, AvailabilityZone=f"{REGION}a", SnapshotId=snapshot)
    with pytest.raises(ec2.exceptions.ClientError, match="IncorrectState"):
        ec2.attach_volume(VolumeId=vol["VolumeId"], InstanceId=iid, Device="/dev/sdg")
    seen = _first_seen(lambda: _volume(ec2, vol["VolumeId"])["State"] == "available",
                       "volume available")
    assert seen - called >= _scaled(Wait.VOLUME_FROM_SNAPSHOT)
    support.wait_for(lambda: (read_json(where / NODES_FILE, {}) or {}).get(iid, {})
                     .get("state") == "ready", "node ready", timeout=60)
    called = time.time()
    ec2.attach_volume(VolumeId=vol["VolumeId"], InstanceId=iid, Device="/dev/sdg")
    assert _attachment_state(ec2, vol["VolumeId"]) in ("attaching", "attached")
    seen = _first_seen(lambda: _attachment_state(ec2, vol["VolumeId"]) == "attached",
                       "volume attached")
    assert seen - called >= _scaled(Wait.VOLUME_ATTACH)
    line = _waits(where)[(Wait.VOLUME_ATTACH.value, vol["VolumeId"])]
    assert line["end"] - line["start"] >= _scaled(Wait.VOLUME_ATTACH) - 0.01
    if (read_json(where / CAPS_FILE, {}) or {}).get("loop_devices"):
        device = _device(where, iid, vol["VolumeId"])
        seen = _first_seen(lambda: os.path.lexists(device), "device in the node")
        assert seen - called >= _scaled(Wait.VOLUME_ATTACH)
        assert os.path.lexists(_device(where, iid, clone))
    ec2.terminate_instances(InstanceIds=[iid])


def test_efs_file_system_and_mount_target_are_creating_first(timed) -> None:
    where, endpoint = timed
    efs, ec2 = _client(where, endpoint, "efs"), _client(where, endpoint, "ec2")
    called = time.time()
    fs = efs.create_file_system(CreationToken=support.unique_name("tf"))
    assert fs["LifeCycleState"] == "creating"
    fs_id = fs["FileSystemId"]
    seen = _first_seen(lambda: efs.describe_file_systems(FileSystemId=fs_id)[
        "FileSystems"][0]["LifeCycleState"] == "available", "file system available")
    assert seen - called >= _scaled(Wait.EFS_FILE_SYSTEM)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    called = time.time()
    target = efs.create_mount_target(FileSystemId=fs_id, SubnetId=subnet)
    assert target["LifeCycleState"] == "creating"
    seen = _first_seen(lambda: efs.describe_mount_targets(FileSystemId=fs_id)[
        "MountTargets"][0]["LifeCycleState"] == "available", "mount target available")
    assert seen - called >= _scaled(Wait.EFS_MOUNT_TARGET)
    waits = _waits(where)
    assert (Wait.EFS_FILE_SYSTEM.value, fs_id) in waits
    line = waits[(Wait.EFS_MOUNT_TARGET.value, target["MountTargetId"])]
    assert line["end"] - line["start"] >= _scaled(Wait.EFS_MOUNT_TARGET) - 0.01
    efs.delete_mount_target(MountTargetId=target["MountTargetId"])
    efs.delete_file_system(FileSystemId=fs_id)


def test_an_instance_profile_is_unknown_to_ec2_until_iam_propagates_it(timed) -> None:
    """What `up` retries through (plan.profiles): each change restarts the wait."""
    where, endpoint = timed
    iam, ec2 = _client(where, endpoint, "iam"), _client(where, endpoint, "ec2")
    name = support.unique_name("tp")
    iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")
    arn = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    (inst,) = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"]
    # Taken before the call: the endpoint starts the wait while it serves it.
    added = time.time()
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)

    def associate() -> bool:
        try:
            ec2.associate_iam_instance_profile(IamInstanceProfile={"Arn": arn},
                                               InstanceId=inst["InstanceId"])
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "InvalidParameterValue"
            assert "Invalid IAM Instance Profile" in exc.response["Error"]["Message"]
            return False
        return True

    assert not associate()
    support.wait_for(associate, "profile associated", timeout=60, interval=0.2)
    assert time.time() - added >= _scaled(Wait.IAM_PROFILE_PROPAGATION)
    waits = _waits(where)
    line = waits[(Wait.IAM_PROFILE_PROPAGATION.value, arn)]
    assert line["end"] - line["start"] >= _scaled(Wait.IAM_PROFILE_PROPAGATION) - 0.01
    ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])


def test_the_untimed_sandbox_makes_each_at_once(tmp_path: Path) -> None:
    where = tmp_path / "state"
    endpoint = do_start(where)["endpoint"]
    try:
        ec2, efs = _client(where, endpoint, "ec2"), _client(where, endpoint, "efs")
        cf = _client(where, endpoint, "cloudformation")
        name = support.unique_name("tu")
        stack = cf.create_stack(StackName=f"clusterkit-{name}", TemplateBody=cfn.template_body(),
                                Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v
                                            in stack_params(ec2, name).items()],
                                Capabilities=["CAPABILITY_IAM"])
        raw = cf.describe_stacks(StackName=stack["StackId"])["Stacks"][0]
        assert raw["StackStatus"] == "CREATE_COMPLETE" and raw["Outputs"]
        scratch = ec2.create_volume(Size=1, AvailabilityZone=f"{REGION}a")["VolumeId"]
        snap = ec2.create_snapshot(VolumeId=scratch)["SnapshotId"]
        assert ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"][0][
            "State"] == "completed"
        vol = ec2.create_volume(Size=1, AvailabilityZone=f"{REGION}a", SnapshotId=snap)
        assert _volume(ec2, vol["VolumeId"])["State"] == "available"
        fs = efs.create_file_system(CreationToken=name)["FileSystemId"]
        efs.create_mount_target(FileSystemId=fs,
                                SubnetId=ec2.describe_subnets()["Subnets"][0]["SubnetId"])
        assert efs.describe_file_systems(FileSystemId=fs)["FileSystems"][0][
            "LifeCycleState"] == "available"
        assert efs.describe_mount_targets(FileSystemId=fs)["MountTargets"][0][
            "LifeCycleState"] == "available"
        cf.delete_stack(StackName=stack["StackId"])
        raw = cf.describe_stacks(StackName=stack["StackId"])["Stacks"][0]
        assert raw["StackStatus"] == "DELETE_COMPLETE"
        lines = read_timeline(where / RUN_DIR / TIMELINE_FILE)
        assert lines and not [w for w in lines if w["kind"] == "wait"]
    finally:
        do_stop(where)
