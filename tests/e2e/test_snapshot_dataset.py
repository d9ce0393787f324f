"""`snapshot-dataset` end to end in the sandbox: a published tree becomes the sandbox's
image of the snapshot (the ext4 filesystem reads back byte-identical), the snapshot is
`pending` until completion; and the node path: a 1-node cluster brought up by `up`, a
volume cloned from the published snapshot, attached and mounted over SSH, snapshotted
by volume id (not device name); nothing mounted there is exit 2 naming node and path."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.dataset import publish
from clusterkit.errors import UsageError
from tests import support
from tests.e2e.clusters import point_at_sandbox, running
from tests.e2e.test_up_down import SANDBOX_AMI
from tests.integration.conftest import runtime, write_spec

SUDO = 'S=; [ "$(id -u)" = 0 ] || S=sudo;'  # sandbox nodes may log in as root
BLOBS = {"train/a.rec": 700_000, "train/a.idx": 50, "val/b.rec": 3_000}


def _tree(root: Path) -> dict[str, bytes]:
    data = {rel: os.urandom(size) for rel, size in BLOBS.items()}
    for rel, blob in data.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    return data


@pytest.fixture(scope="module")
def published(sandbox, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[publish.PublishResult, dict[str, bytes]]]:
    where = tmp_path_factory.mktemp("publish")
    data = _tree(where / "data")
    with pytest.MonkeyPatch.context() as mp:
        point_at_sandbox(mp, sandbox)
        result = publish.do_snapshot_dataset(str(where / "data"),
                                             label=support.unique_name("ds"),
                                             rt=runtime(), threads=4)
    yield result, data
    sandbox.client("ec2").delete_snapshot(SnapshotId=result.snapshot_id)


def test_published_snapshot_is_an_image_in_the_sandbox(sandbox, published) -> None:
    result, data = published
    image = sandbox.dir / "run" / "disks" / f"{result.snapshot_id}.img"
    assert image.stat().st_size == result.size_gib << 30
    for rel, blob in data.items():
        out = subprocess.run(["debugfs", "-R", f"cat /{rel}", str(image)],
                             capture_output=True, check=True).stdout
        assert out == blob, rel
    snap = sandbox.client("ec2").describe_snapshots(
        SnapshotIds=[result.snapshot_id])["Snapshots"][0]
    assert snap["State"] == "completed"
    assert snap["Encrypted"] is True and snap["KmsKeyId"]  # the default EBS key
    tags = {t["Key"]: t["Value"] for t in snap["Tags"]}
    assert tags["clusterkit:published"] == "complete"
    assert tags["clusterkit:manifest-sha256"] == result.manifest_sha256


def test_direct_snapshot_is_pending_until_complete(sandbox_env) -> None:
    ebs, ec2 = sandbox_env.client("ebs"), sandbox_env.client("ec2")
    snap = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    assert ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"][0]["State"] == "pending"
    ebs.complete_snapshot(SnapshotId=snap, ChangedBlocksCount=0)
    assert ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"][0]["State"] == "completed"
    ec2.delete_snapshot(SnapshotId=snap)


@pytest.fixture
def node_cluster(sandbox_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    support.require_root("the sandbox's SSH nodes")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path / "ckhome"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    support.user_ssh_key(tmp_path)
    name = support.unique_name("sn")
    spec = write_spec(tmp_path, name=name, count=1, ami=SANDBOX_AMI, placement_group=False)
    with running(spec, name, timeout=120):
        yield name


def test_snapshot_of_a_node_volume_found_by_volume_id(sandbox, published,
                                                      node_cluster: str) -> None:
    source, _data = published
    ec2 = sandbox.client("ec2")
    inst = ec2.describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [node_cluster]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"][0][
        "Instances"][0]
    vol = ec2.create_volume(SnapshotId=source.snapshot_id, Size=source.size_gib,
                            AvailabilityZone=inst["Placement"]["AvailabilityZone"],
                            TagSpecifications=[{"ResourceType": "volume", "Tags": [
                                {"Key": "clusterkit:cluster", "Value": node_cluster}]}])
    vol_id = vol["VolumeId"]
    ec2.attach_volume(VolumeId=vol_id, InstanceId=inst["InstanceId"], Device="/dev/sdf")
    link = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + vol_id.replace("-", "")
    do_exec(node_cluster, [f"{SUDO} for i in $(seq 50); do [ -e {link} ] && break; "
                           f"sleep 0.1; done; $S mkdir -p /data && "
                           f"$S mount -o ro,noatime {link} /data"], rt=runtime())
    try:
        label = support.unique_name("nv")
        result = publish.do_snapshot_volume(node_cluster, node="0", path="/data",
                                            label=label, rt=runtime())
        assert result.volume_id == vol_id and result.source == "volume"
        assert result.manifest_sha256 == source.manifest_sha256
        snap = ec2.describe_snapshots(SnapshotIds=[result.snapshot_id])["Snapshots"][0]
        assert snap["VolumeId"] == vol_id and snap["State"] == "completed"
        assert snap["Encrypted"] is True  # a clone of an encrypted snapshot: kept as is
        tags = {t["Key"]: t["Value"] for t in snap["Tags"]}
        assert tags["clusterkit:dataset"] == label
        assert tags["clusterkit:published"] == "complete"
        assert "clusterkit:cluster" not in tags  # `down` of the cluster keeps it
        with pytest.raises(UsageError, match="mounted at /nothing on node"):
            publish.do_snapshot_volume(node_cluster, node="0", path="/nothing",
                                       label=label, rt=runtime())
        ec2.delete_snapshot(SnapshotId=result.snapshot_id)
    finally:
        do_exec(node_cluster, [f"{SUDO} $S umount /data || true"], rt=runtime())
        ec2.detach_volume(VolumeId=vol_id, InstanceId=inst["InstanceId"], Device="/dev/sdf")
