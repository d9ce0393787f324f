"""`deploy-dataset` end to end in the sandbox (moto server, a real sshd per node on
loopback, EBS volumes as loop-backed images attached where the node shows them by volume
id). Nothing is mocked: a directory is published with snapshot-dataset's own code, the
clones are made, attached and mounted by the real commands, and the nodes read the files.

One 3-node t3 cluster for the module (no scratch, no EFS, no packages). The tests hold
in any order (CI shuffles them): the first deploy is a module fixture the others build on,
and the swap puts the first snapshot back when done; `down` at the end must leave no
volume of the cluster behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.dataset.deploy import DeployResult, do_deploy_dataset
from clusterkit.cluster.dataset.publish import publish_directory
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.plan import dataset as pd
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session
from tests.integration.conftest import REGION, Calls, leftovers, runtime

CLI = str(Path(sys.executable).with_name("clusterkit"))
SECTIONS = """\
storage:
  dataset: {{mount: /data{extra}}}
train:
  packages: []
"""


def dataset_spec(name: str, extra: str = "", *, count: int = 3) -> str:
    """``count`` t3 nodes with a dataset at /data (``extra``: more of its keys, e.g.
    ``", snapshot: snap-..."``), no scratch, no EFS, no packages."""
    return sandbox_spec(name, count=count, instance_type="t3.micro",
                        extra=SECTIONS.format(extra=extra))


@dataclass
class Cluster:
    name: str
    spec: Path
    where: Path
    snapshot: str = ""

    def write_spec(self, extra: str = "", path: Path | None = None) -> Path:
        path = path or self.spec
        path.write_text(dataset_spec(self.name, extra))
        return path

    def deploy(self, snapshot: str, calls: Calls | None = None, **kw) -> DeployResult:
        return do_deploy_dataset(str(kw.pop("spec", self.spec)), snapshot=snapshot,
                                 rt=runtime(calls), timeout=180, **kw)

    def everywhere(self, command: str) -> list[str]:
        return [r.stdout for r in do_exec(self.name, [command], rt=runtime()).values()]

    def clone_ids(self) -> list[str]:
        ec2 = boto3.client("ec2", REGION)
        vols = ec2.describe_volumes(Filters=[
            {"Name": "tag:clusterkit:cluster", "Values": [self.name]}])["Volumes"]
        return sorted(v["VolumeId"] for v in vols if v.get("SnapshotId")
                      and {t["Key"]: t["Value"] for t in v.get("Tags", [])}.get(
                          pd.CLONE_OF_TAG) == v["SnapshotId"])


def publish(where: Path, label: str, files: dict[str, bytes]) -> str:
    root = where / label
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    return publish_directory(runtime(), REGION, root, label).snapshot_id


FILES = {"train.rec": os.urandom(300_000), "train.idx": b"0\t0\n1\t4096\n",
         "train.lst": b"0\t0\tcat/1.jpg\n"}
FILES_B = {"val.rec": os.urandom(50_000), "val.idx": b"0\t0\n"}


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes and loop devices")
    where = tmp_path_factory.mktemp("deploy")
    name = support.unique_name("dd")
    cl = Cluster(name, where / f"{name}.yaml", where)
    cl.write_spec()
    with user_session(sandbox, where), running(cl.spec, name):  # down: no clone left
        cl.snapshot = publish(where, "imgs", FILES)
        yield cl


@pytest.fixture(scope="module")
def first(cluster: Cluster) -> DeployResult:
    """The cluster's first deploy-dataset (of ``cluster.snapshot``)."""
    result = cluster.deploy(cluster.snapshot)
    assert sorted(n.volume_id for n in result.nodes) == cluster.clone_ids()
    return result


def test_deploy_mounts_the_files_read_only_and_verified_on_every_node(cluster: Cluster,
                                                                      first: DeployResult):
    result = first
    assert [n.index for n in result.nodes] == [0, 1, 2]
    assert [n.action for n in result.nodes] == ["created"] * 3 and result.changed
    assert len({n.volume_id for n in result.nodes}) == 3 == len(cluster.clone_ids())
    for node in result.nodes:
        assert "verified" in node.line and "3 files" in node.line, node.line
    expected = "".join(f"{len(FILES[n])} {n}\n" for n in sorted(FILES))
    listing = cluster.everywhere("cd /data && for f in train.*; do "
                                 "printf '%s %s\\n' $(stat -c %s $f) $f; done")
    assert listing == [expected] * 3
    digest = __import__("hashlib").sha256(FILES["train.rec"]).hexdigest()
    assert [o.split()[0] for o in cluster.everywhere("sha256sum /data/train.rec")] == \
        [digest] * 3
    for out in cluster.everywhere("touch /data/x 2>&1; findmnt -no OPTIONS /data"):
        assert "Read-only file system" in out and "ro" in out.split("\n")[-2].split(","), out


def test_second_deploy_makes_no_mutating_call(cluster: Cluster, first: DeployResult):
    calls = Calls()
    result = cluster.deploy(cluster.snapshot, calls)
    assert calls.mutating() == {}, calls.mutating()
    assert not result.changed and [n.action for n in result.nodes] == ["kept"] * 3


def _refused(cluster: Cluster, snapshot: str, **kw) -> UsageError:
    calls = Calls()
    with pytest.raises(UsageError) as err:
        cluster.deploy(snapshot, calls, **kw)
    assert err.value.exit_code == 2 and snapshot in err.value.message
    assert calls.mutating() == {}, calls.mutating()
    return err.value


def test_unknown_interrupted_too_large_and_other_region_snapshots_exit_2(cluster: Cluster):
    before = cluster.clone_ids()
    assert "no snapshot" in _refused(cluster, "snap-0123456789abcdef0").message
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=5)["VolumeId"]
    upload = ec2.create_snapshot(VolumeId=vol, TagSpecifications=[{
        "ResourceType": "snapshot", "Tags": [{"Key": pd.UPLOAD_TAG, "Value": "half"}]}])
    assert "interrupted" in _refused(cluster, upload["SnapshotId"]).message
    big = ec2.create_snapshot(VolumeId=vol)["SnapshotId"]
    small = cluster.write_spec(", size_gb: 2", cluster.where / "small.yaml")
    assert "larger than" in _refused(cluster, big, spec=small).message
    west = boto3.client("ec2", "us-west-2")
    wvol = west.create_volume(AvailabilityZone="us-west-2a", Size=1)["VolumeId"]
    far = west.create_snapshot(VolumeId=wvol)["SnapshotId"]
    err = _refused(cluster, far)
    assert "us-west-2" in err.message and "copy-snapshot" in (err.hint or "")
    for cleanup in ((ec2, vol, (upload["SnapshotId"], big)), (west, wvol, (far,))):
        client, volume, snaps = cleanup
        client.delete_volume(VolumeId=volume)
        for sid in snaps:
            client.delete_snapshot(SnapshotId=sid)
    assert cluster.clone_ids() == before


def test_cli_exit_code_2_and_json_error_for_an_unknown_snapshot(cluster: Cluster):
    proc = subprocess.run([CLI, "deploy-dataset", str(cluster.spec), "--snapshot",
                           "snap-0123456789abcdef0", "--json"], capture_output=True, text=True,
                          timeout=120, env=os.environ)
    assert proc.returncode == 2, proc.stderr
    assert "snap-0123456789abcdef0" in proc.stdout and "Traceback" not in proc.stderr


def test_another_snapshot_asks_then_swaps_the_volumes(cluster: Cluster, first: DeployResult):
    old = cluster.clone_ids()
    other = publish(cluster.where, "valset", FILES_B)
    with pytest.raises(UsageError):  # no terminal, no --yes: refused, nothing changed
        cluster.deploy(other)
    with pytest.raises(ClusterkitError) as declined:
        cluster.deploy(other, confirm=lambda question: False)
    assert declined.value.exit_code == 1 and cluster.clone_ids() == old
    result = cluster.deploy(other, yes=True)
    assert sorted(result.removed) == old and [n.action for n in result.nodes] == ["created"] * 3
    assert set(cluster.clone_ids()).isdisjoint(old) and len(cluster.clone_ids()) == 3
    assert cluster.everywhere("ls /data | grep -v lost+found | grep -v manifest") == \
        ["val.idx\nval.rec\n"] * 3
    for node in result.nodes:
        assert "verified 2 files" in node.line, node.line
    swapped = cluster.clone_ids()
    back = cluster.deploy(cluster.snapshot, yes=True)  # as the other tests expect it
    assert sorted(back.removed) == swapped and [n.action for n in back.nodes] == ["created"] * 3
    assert cluster.everywhere("ls /data | grep rec") == ["train.rec\n"] * 3


def test_snapshot_in_the_spec_clones_at_launch_and_down_removes_them(cluster: Cluster):
    """A second cluster whose spec names the snapshot: the clones come with the launch
    (BlockDeviceMappings), `up`'s bootstrap mounts them, deploy-dataset then changes
    nothing, `status` shows hydration "unknown" (the emulator reports none), and `down`
    leaves no volume. A snapshot `up` would refuse is refused before any mutating call."""
    from clusterkit.cluster.ops.status import do_status

    name = support.unique_name("dl")
    spec = cluster.where / f"{name}.yaml"
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    half = ec2.create_snapshot(VolumeId=vol, TagSpecifications=[{
        "ResourceType": "snapshot", "Tags": [{"Key": pd.UPLOAD_TAG, "Value": "half"}]}])[
        "SnapshotId"]
    ec2.delete_volume(VolumeId=vol)
    spec.write_text(dataset_spec(name, f", snapshot: {half}", count=2))
    calls = Calls()
    with pytest.raises(UsageError) as err:
        do_up(str(spec), yes=True, rt=runtime(calls), timeout=180)
    assert err.value.exit_code == 2 and half in err.value.message
    assert calls.mutating() == {} and leftovers(name) == {}
    ec2.delete_snapshot(SnapshotId=half)
    spec.write_text(dataset_spec(name, f", snapshot: {cluster.snapshot}, "
                                 "initialization_rate: 200", count=2))
    with running(spec, name) as up:  # down: no volume left
        assert up.bootstrap is not None
        lines = [s.output for n in up.bootstrap.nodes for s in n.steps if s.step == "dataset"]
        assert len(lines) == 2 and all("verified 3 files" in o for o in lines), lines
        launched = Cluster(name, spec, cluster.where)
        assert len(launched.clone_ids()) == 2
        sizes = launched.everywhere("stat -c %s /data/train.rec")
        assert [s.strip() for s in sizes] == [str(len(FILES["train.rec"]))] * 2
        calls = Calls()
        again = launched.deploy(cluster.snapshot, calls)
        assert calls.mutating() == {} and not again.changed
        status = do_status(name, rt=runtime())
        assert [(d.index, d.hydration) for d in status.dataset] == [(0, "unknown"),
                                                                    (1, "unknown")]
