"""aws.volumes against the emulator over HTTP: volumes found by the cluster tag,
deleted, and "already gone" not an error."""

from __future__ import annotations

import boto3

from clusterkit.aws import volumes
from clusterkit.aws.session import make_session
from clusterkit.cluster.dataset.checks import hydration
from clusterkit.cluster.runtime import Runtime
from clusterkit.plan import dataset as pd
from tests import support
from tests.integration.conftest import AMI, REGION


def test_find_and_delete(moto_env):
    s, cluster = make_session(REGION), support.unique_name("vol")
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=3, VolumeType="gp3",
                            TagSpecifications=[
        {"ResourceType": "volume",
         "Tags": [{"Key": "clusterkit:cluster", "Value": cluster}]}])["VolumeId"]
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)  # not the cluster's
    assert volumes.cluster_volumes(s, REGION, cluster) == [
        {"id": vol, "state": "available", "attached_to": [], "size_gib": 3, "type": "gp3"}]
    assert volumes.delete_volume(s, REGION, vol) is True
    assert volumes.delete_volume(s, REGION, vol) is False  # InvalidVolume.NotFound
    assert volumes.cluster_volumes(s, REGION, cluster) == []


# -- dataset snapshots and clones --------------------------------------------------------------

def _snapshot(ec2, tags: dict[str, str] | None = None, size: int = 2) -> str:
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=size)["VolumeId"]
    spec = [{"ResourceType": "snapshot", "Tags": [{"Key": k, "Value": v}
                                                  for k, v in (tags or {}).items()]}]
    snap = ec2.create_snapshot(VolumeId=vol, **({"TagSpecifications": spec} if tags else {}))
    ec2.delete_volume(VolumeId=vol)
    return snap["SnapshotId"]


def _instance(ec2) -> str:
    return ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="t3.micro",
                             Placement={"AvailabilityZone": f"{REGION}a"})[
        "Instances"][0]["InstanceId"]


def test_describe_snapshot_reads_state_size_and_tags_and_none_when_unknown(moto_env):
    s, ec2 = make_session(REGION), boto3.client("ec2", REGION)
    sid = _snapshot(ec2, {"clusterkit:dataset": "imgs", "clusterkit:published": "complete",
                          "clusterkit:manifest-sha256": "ab" * 32}, size=3)
    snap = volumes.describe_snapshot(s, REGION, sid)
    assert snap is not None and snap.snapshot_id == sid and snap.size_gib == 3
    assert snap.state == "completed" and snap.published and snap.label == "imgs"
    assert snap.manifest_sha256 == "ab" * 32 and snap.region == REGION
    assert volumes.describe_snapshot(s, REGION, "snap-0123456789abcdef0") is None
    assert volumes.describe_snapshot(s, "us-west-2", sid) is None  # snapshots are regional


def test_clone_created_encrypted_from_the_snapshot_attached_and_found_by_tag(moto_env):
    s, ec2 = make_session(REGION), boto3.client("ec2", REGION)
    cluster = support.unique_name("dsv")
    sid, iid = _snapshot(ec2), _instance(ec2)
    tags = pd.clone_tags({"clusterkit:cluster": cluster}, sid, 0)
    vol = volumes.create_clone(s, REGION, az=f"{REGION}a", snapshot_id=sid, size_gib=4,
                               volume_type="gp3", iops=4000, throughput=200,
                               initialization_rate=200, tags=tags, client_token="tok-" + cluster)
    raw = ec2.describe_volumes(VolumeIds=[vol])["Volumes"][0]
    assert raw["Encrypted"] is True and raw["SnapshotId"] == sid and raw["Size"] == 4
    assert raw["AvailabilityZone"] == f"{REGION}a" and raw["VolumeType"] == "gp3"
    volumes.attach_volume(s, REGION, vol, iid, pd.DEVICE_HINT)
    volumes.delete_on_termination(s, REGION, iid, pd.DEVICE_HINT)
    [clone] = volumes.dataset_clones(s, REGION, cluster)
    assert (clone.volume_id, clone.snapshot_id, clone.instance_id, clone.node_index) == \
        (vol, sid, iid, 0)
    assert clone.device == pd.DEVICE_HINT
    bdm = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0][
        "BlockDeviceMappings"]
    assert [m["Ebs"]["DeleteOnTermination"] for m in bdm
            if m["Ebs"]["VolumeId"] == vol] == [True]
    # moto reports no initialization details (its DescribeVolumeStatus even fails): unknown
    rt = Runtime(session=s)
    assert hydration(rt, REGION, [vol]) == {vol: "unknown"}


def test_a_volume_whose_clone_tag_is_not_its_own_snapshot_is_no_clone(moto_env):
    """A launch tags every volume alike: the root volume carries the clone tag too, but
    its SnapshotId is not the dataset's."""
    s, ec2 = make_session(REGION), boto3.client("ec2", REGION)
    cluster = support.unique_name("dsr")
    sid, other = _snapshot(ec2), _snapshot(ec2)
    tags = [{"ResourceType": "volume", "Tags": [
        {"Key": "clusterkit:cluster", "Value": cluster},
        {"Key": pd.CLONE_OF_TAG, "Value": sid}]}]
    ec2.create_volume(AvailabilityZone=f"{REGION}a", SnapshotId=other,
                      TagSpecifications=tags)
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=tags)
    assert volumes.dataset_clones(s, REGION, cluster) == []


def test_clone_encrypted_with_the_spec_key(moto_env):
    s, ec2 = make_session(REGION), boto3.client("ec2", REGION)
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]["Arn"]
    cluster = support.unique_name("dsk")
    sid = _snapshot(ec2)
    vol = volumes.create_clone(s, REGION, az=f"{REGION}a", snapshot_id=sid, size_gib=4,
                               volume_type="gp3", iops=None, throughput=None,
                               initialization_rate=None,
                               tags=pd.clone_tags({"clusterkit:cluster": cluster}, sid, 0),
                               client_token="tok-" + cluster, kms_key=key)
    raw = ec2.describe_volumes(VolumeIds=[vol])["Volumes"][0]
    assert raw["Encrypted"] is True and raw["KmsKeyId"] == key
