"""The dataset workflow end to end in the sandbox, every step through the `clusterkit`
command: a generated tree of real JPEG/PNG images is packed (`clusterkit pack`), published
(`snapshot-dataset`), cloned onto a 3-node cluster (`deploy-dataset`), and on every node
MXNet's own reader (``MXIndexedRecordIO`` over the read-only mount, run over SSH with the
system python and the .venv's mxnet) reads every record back: the same keys, headers,
image bytes and decoded shapes as the local pack. Then: a second deploy taking the
snapshot from the spec changes nothing; a real `snapshot-dataset` killed with SIGKILL
halfway through its upload leaves only a snapshot deploy-dataset refuses (exit 2), which
the rerun deletes; `down` leaves no volume, and no snapshot clusterkit did not publish.

One module, its own 3-node t3 cluster. The tests hold in any order (CI shuffles them):
the pack -> publish -> first deploy is a module fixture, and `down` with its checks is the
cluster fixture's teardown, after every test of the module."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.plan import dataset as pd
from tests import support
from tests.e2e.clusters import user_session
from tests.e2e.test_deploy_dataset import dataset_spec
from tests.integration.conftest import REGION, leftovers, runtime
from tests.unit.dataset_images import make_tree, photo, write_image

pytestmark = pytest.mark.mxnet

CLI = str(Path(sys.executable).with_name("clusterkit"))
SITE = sysconfig.get_paths()["purelib"]  # the .venv's mxnet, for the nodes' system python
# Every record of every PREFIX.idx/.rec pair under argv[1], in key order: the file, key,
# decoded image shape and sha256 of the unpacked header fields + image bytes.
READ_RECORDS = """\
import glob, hashlib, sys
import mxnet as mx
for idx in sorted(glob.glob(sys.argv[1] + "/*.idx")):
    rec = mx.recordio.MXIndexedRecordIO(idx, idx[:-4] + ".rec", "r")
    for key in sorted(rec.keys):
        header, img = mx.recordio.unpack(rec.read_idx(key))
        label = header.label.tolist() if hasattr(header.label, "tolist") else header.label
        head = repr((header.flag, label, header.id, header.id2)).encode()
        shape = mx.image.imdecode(img).shape
        print(idx.rsplit("/", 1)[1], key, "x".join(map(str, shape)),
              hashlib.sha256(head + img).hexdigest())
    rec.close()
"""


@dataclass
class Flow:
    name: str
    spec: Path
    where: Path
    snapshots_before: set[str]
    published: list[str] = field(default_factory=list)  # snapshots the tests published
    pack: Path | None = None
    snapshot: str = ""

    def write_spec(self, extra: str = "") -> Path:
        self.spec.write_text(dataset_spec(self.name, extra))
        return self.spec

    def cli(self, *args: str, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=cwd, stdin=subprocess.DEVNULL, env=os.environ.copy())

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        proc = self.cli(*args, cwd=cwd)
        assert proc.returncode == 0, f"clusterkit {' '.join(args)}:\n{proc.stderr[-3000:]}"
        return proc.stdout

    def on_nodes(self, command: str) -> dict[str, str]:
        return {label: r.stdout for label, r in do_exec(self.name, [command],
                                                        rt=runtime()).items()}

    def clone_ids(self) -> list[str]:
        vols = boto3.client("ec2", REGION).describe_volumes(Filters=[
            {"Name": "tag:clusterkit:cluster", "Values": [self.name]}])["Volumes"]
        return sorted(v["VolumeId"] for v in vols if v.get("SnapshotId")
                      and {t["Key"]: t["Value"] for t in v.get("Tags", [])}.get(
                          pd.CLONE_OF_TAG) == v["SnapshotId"])


def own_snapshots() -> dict[str, dict]:
    return {s["SnapshotId"]: s for s in boto3.client("ec2", REGION).describe_snapshots(
        OwnerIds=["self"])["Snapshots"]}


@pytest.fixture(scope="module")
def flow(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    support.require_root("the sandbox's SSH nodes and loop devices")
    where = tmp_path_factory.mktemp("dsflow")
    name = support.unique_name("dp")
    with user_session(sandbox, where):
        fl = Flow(name, where / f"{name}.yaml", where, set(own_snapshots()))
        fl.write_spec()
        try:
            fl.ok("up", str(fl.spec), "--yes")
            yield fl
        finally:
            try:
                _down_leaves_only_published_snapshots(fl)
            finally:
                ec2 = boto3.client("ec2", REGION)
                for snap in fl.published:
                    ec2.delete_snapshot(SnapshotId=snap)


def _image_tree(root: Path) -> int:
    """Real JPEGs and PNGs of mixed sizes in class folders; how many images."""
    paths = make_tree(str(root), classes=4, per_class=7, seed=3)
    for i in range(4):  # a few larger photos, several JPEG blocks each
        paths.append(write_image(str(root / "class_big" / f"p{i}.jpg"),
                                 photo(180 + 20 * i, 240, 50 + i)))
    return len(paths)


def _records(lines: str) -> list[str]:
    return [line for line in lines.splitlines() if line.strip()]


@dataclass(frozen=True)
class Deployed:
    local: str  # READ_RECORDS over the local pack
    images: int
    published: dict
    first: dict  # the first deploy-dataset's --json


@pytest.fixture(scope="module")
def deployed(flow: Flow) -> Deployed:
    """`clusterkit pack` (list, then pack) of a generated image tree, `snapshot-dataset`
    of the pack, and the first `deploy-dataset` (full verification)."""
    images = _image_tree(flow.where / "images")
    pack = flow.where / "imgset"
    pack.mkdir()
    flow.ok("pack", "--list", "--recursive", "--train-ratio", "0.75", "out",
            str(flow.where / "images"), cwd=pack)
    flow.ok("pack", "--resize", "64", "--num-thread", "2", "out", str(flow.where / "images"),
            cwd=pack)
    local = subprocess.run([sys.executable, "-c", READ_RECORDS, str(pack)], check=True,
                           capture_output=True, text=True, timeout=120).stdout
    published = json.loads(flow.ok("snapshot-dataset", str(pack), "--region", REGION,
                                   "--name", "imgset", "--json"))
    flow.snapshot = published["snapshot_id"]
    flow.published.append(flow.snapshot)
    first = json.loads(flow.ok("deploy-dataset", str(flow.spec), "--snapshot", flow.snapshot,
                               "--verify", "full", "--json"))
    return Deployed(local, images, published, first)


def test_pack_publish_deploy_and_every_node_reads_every_record_back(
        flow: Flow, deployed: Deployed) -> None:
    pack = flow.where / "imgset"
    assert sorted(p.name for p in pack.glob("*.rec")) == ["out_train.rec", "out_val.rec"]
    local = deployed.local
    assert len(_records(local)) == deployed.images  # every image is a record, read locally
    assert deployed.published["files"] == 6 and deployed.published["manifest_sha256"]
    out = deployed.first
    assert [n["action"] for n in out["nodes"]] == ["created"] * 3 and out["changed"]
    assert sorted(n["volume_id"] for n in out["nodes"]) == flow.clone_ids()
    for node in out["nodes"]:
        assert "verified 6 files" in node["line"] and "(sha256)" in node["line"], node

    read = shlex.join(["/usr/bin/python3", "-c", READ_RECORDS, "/data"])
    remote = flow.on_nodes(f"PYTHONPATH={shlex.quote(SITE)} OMP_NUM_THREADS=1 {read}")
    assert len(remote) == 3
    for label, lines in remote.items():
        assert _records(lines) == _records(local), label


def test_second_deploy_from_the_specs_snapshot_changes_nothing(flow: Flow,
                                                               deployed: Deployed) -> None:
    before = flow.clone_ids()
    flow.write_spec(f", snapshot: {flow.snapshot}")
    out = json.loads(flow.ok("deploy-dataset", str(flow.spec), "--json"))  # no --snapshot
    assert out["snapshot"] == flow.snapshot and not out["changed"]
    assert [n["action"] for n in out["nodes"]] == ["kept"] * 3
    assert flow.clone_ids() == before
    status = json.loads(flow.ok("status", flow.name, "--json"))
    assert sorted(d["volume_id"] for d in status["dataset"]) == before
    assert {d["hydration"] for d in status["dataset"]} == {"unknown"}  # none in the sandbox


def _dataset_steps(out: dict) -> list[dict]:
    return [s for n in out["bootstrap"]["nodes"] for s in n["steps"] if s["step"] == "dataset"]


def test_prewarm_reads_every_block_on_every_node_once_and_keeps_a_receipt(
        flow: Flow, deployed: Deployed) -> None:
    before = flow.on_nodes("cat /var/lib/clusterkit/steps/dataset")
    prewarm = ("deploy-dataset", str(flow.spec), "--snapshot", flow.snapshot, "--prewarm",
               "--json")
    out = json.loads(flow.ok(*prewarm))
    assert not out["changed"]  # no AWS change: the node step runs again, prewarming
    ran = _dataset_steps(out)
    assert [s["outcome"] for s in ran] == ["ran"] * 3
    for step in ran:
        assert "prewarmed" in step["output"] and "MB/s" in step["output"], step
    receipts = flow.on_nodes("cat /var/lib/clusterkit/steps/dataset")
    assert len(receipts) == 3 and all(r.startswith("sha256:") for r in receipts.values())
    assert all(receipts[n] != before[n] for n in receipts)  # the prewarm's own receipt
    again = json.loads(flow.ok(*prewarm))
    assert [s["outcome"] for s in _dataset_steps(again)] == ["already done"] * 3
    assert flow.on_nodes("cat /var/lib/clusterkit/steps/dataset") == receipts


def _upload_started(label: str, timeout: float = 60) -> str:
    """The snapshot id of the upload of ``label`` once it holds a few blocks."""
    ec2, ebs = boto3.client("ec2", REGION), boto3.client("ebs", REGION)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ec2.describe_snapshots(OwnerIds=["self"], Filters=[
            {"Name": f"tag:{pd.UPLOAD_TAG}", "Values": [label]}])["Snapshots"]
        if found and len(ebs.list_snapshot_blocks(SnapshotId=found[0]["SnapshotId"])[
                "Blocks"]) >= 4:
            return str(found[0]["SnapshotId"])
        time.sleep(0.05)
    raise AssertionError(f"no upload of {label} under way after {timeout} s")


def test_an_upload_killed_halfway_leaves_nothing_deploy_dataset_accepts(
        flow: Flow, deployed: Deployed) -> None:
    big = flow.where / "big"
    big.mkdir()
    for i in range(4):  # random bytes: no block is skipped, one thread takes seconds
        (big / f"part-{i}.rec").write_bytes(os.urandom(10 << 20))
    volumes_before = {v["VolumeId"] for v in boto3.client("ec2", REGION).describe_volumes()[
        "Volumes"]}
    proc = subprocess.Popen([CLI, "snapshot-dataset", str(big), "--region", REGION,
                             "--name", "bigset", "--threads", "1"], env=os.environ.copy(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        half = _upload_started("bigset")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL  # killed, not finished
    snap = own_snapshots()[half]
    blocks = boto3.client("ebs", REGION).list_snapshot_blocks(SnapshotId=half)["Blocks"]
    assert snap["State"] == "pending" and len(blocks) >= 4
    assert pd.PUBLISHED_TAG not in {t["Key"] for t in snap.get("Tags", [])}

    clones = flow.clone_ids()
    refused = flow.cli("deploy-dataset", str(flow.spec), "--snapshot", half, "--json")
    assert refused.returncode == 2, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert half in error and "not completed" in error
    assert flow.clone_ids() == clones
    after = {v["VolumeId"] for v in boto3.client("ec2", REGION).describe_volumes()["Volumes"]}
    assert after == volumes_before  # the upload made no volume

    again = json.loads(flow.ok("snapshot-dataset", str(big), "--region", REGION,
                               "--name", "bigset", "--json"))
    flow.published.append(again["snapshot_id"])
    assert again["removed"] == [half] and half not in own_snapshots()
    assert len(blocks) < again["blocks_put"]  # it was killed halfway, not at the end


def _down_leaves_only_published_snapshots(flow: Flow) -> None:
    """`down` (the CLI) removes the clones and everything else of the cluster; the
    snapshots left that were not there before are the ones the tests published."""
    had_clones = len(flow.clone_ids())
    flow.ok("down", str(flow.spec), "--yes")
    assert leftovers(flow.name) == {} and flow.clone_ids() == []
    assert had_clones in (0, 3)  # 0: the module stopped before its first deploy
    left = set(own_snapshots()) - flow.snapshots_before
    assert left == set(flow.published)
    for sid in left:
        tags = {t["Key"]: t["Value"] for t in own_snapshots()[sid].get("Tags", [])}
        assert tags.get(pd.PUBLISHED_TAG) == "complete", (sid, tags)
