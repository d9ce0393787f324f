"""`snapshot-dataset DIR` against the moto server (real HTTP, the sandbox's EBS gap
patch): a generated tree is published with its tags only after completion; an upload
stopped halfway leaves a snapshot that is not usable and the rerun deletes it; bad
input exits 2 before any AWS call."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from clusterkit.aws import ebs_direct
from clusterkit.cli.main import cli
from clusterkit.cluster.dataset import publish
from clusterkit.dataset import manifest
from clusterkit.events import Collect, Event, Kind
from clusterkit_sandbox import ebs_direct as sandbox_ebs
from tests import support
from tests.integration.conftest import REGION, runtime


@pytest.fixture
def env(moto_env: str, monkeypatch: pytest.MonkeyPatch) -> str:
    sandbox_ebs.install()
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # the CLI straight at the emulator
    return moto_env


def _tree(root: Path, files: int = 30, size: int = 200_000) -> Path:
    for i in range(files):
        sub = root / f"class{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i}.bin").write_bytes(os.urandom(size))
    return root


def _snapshot(snapshot_id: str) -> dict:
    ec2 = boto3.client("ec2", REGION)
    return ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]


def _tags(snapshot_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in _snapshot(snapshot_id).get("Tags", [])}


def test_publish_tags_only_a_completed_snapshot(env: str, tmp_path: Path) -> None:
    label = support.unique_name("ds")
    root = _tree(tmp_path / "data")
    rt = runtime()
    rt.report = Collect()
    result = publish.do_snapshot_dataset(str(root), label=label, rt=rt, threads=4)
    written = (root / manifest.MANIFEST_NAME).read_bytes()
    assert result.manifest_sha256 == hashlib.sha256(written).hexdigest()
    assert len(json.loads(written)["files"]) == 30
    snap = _snapshot(result.snapshot_id)
    assert snap["State"] == "completed" and snap["VolumeSize"] == result.size_gib == 1
    assert _tags(result.snapshot_id) == {
        "clusterkit:dataset-upload": label, "clusterkit:dataset": label,
        "clusterkit:published": "complete",
        "clusterkit:manifest-sha256": result.manifest_sha256}
    assert result.blocks_put * ebs_direct.BLOCK_SIZE == result.bytes_uploaded
    assert result.bytes_uploaded >= 30 * 200_000
    assert result.blocks_put + result.blocks_skipped == 2048
    assert result.mb_per_s > 0
    assert snap["Encrypted"] is True and result.kms_key is None  # the default EBS key
    progress = [e for e in rt.report.events if e.kind is Kind.PROGRESS]
    assert progress and progress[-1].done == progress[-1].total
    assert json.loads(json.dumps(result.to_json()))["snapshot_id"] == result.snapshot_id


class Stop(Exception):
    pass


def _stop_halfway(event: Event) -> None:
    if event.kind is Kind.PROGRESS and event.done and event.total and event.done > 2:
        raise Stop


def test_interrupted_upload_is_not_usable_and_the_rerun_removes_it(env: str,
                                                                   tmp_path: Path) -> None:
    label = support.unique_name("ds")
    root = _tree(tmp_path / "data", files=40)
    rt = runtime()
    rt.report = _stop_halfway
    with pytest.raises(Stop):
        publish.do_snapshot_dataset(str(root), label=label, rt=rt, threads=2)
    ec2 = boto3.client("ec2", REGION)
    left = ec2.describe_snapshots(OwnerIds=["self"], Filters=[
        {"Name": "tag:clusterkit:dataset-upload", "Values": [label]}])["Snapshots"]
    assert len(left) == 1 and left[0]["State"] == "pending"
    assert "clusterkit:published" not in {t["Key"] for t in left[0]["Tags"]}
    # someone else's snapshot with a similar tag value is never touched
    other = ec2.create_snapshot(VolumeId=ec2.create_volume(
        Size=1, AvailabilityZone=f"{REGION}a")["VolumeId"])["SnapshotId"]
    again = publish.do_snapshot_dataset(str(root), label=label, rt=runtime(), threads=2)
    assert again.removed == (left[0]["SnapshotId"],)
    ids = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert left[0]["SnapshotId"] not in ids and other in ids
    assert _tags(again.snapshot_id)["clusterkit:published"] == "complete"
    third = publish.do_snapshot_dataset(str(root), label=label, rt=runtime(), threads=2)
    assert third.removed == ()  # a published snapshot is never an abandoned upload
    assert again.snapshot_id in {s["SnapshotId"] for s in ec2.describe_snapshots(
        OwnerIds=["self"])["Snapshots"]}


@pytest.mark.parametrize(("make", "label", "needle"), [
    ("missing", "ok", "is not a directory"),
    ("empty", "ok", "is empty"),
    ("file", "ok", "is not a directory"),
    ("tree", "Bad_Label!", "is not a dataset label"),
    ("symlink", "ok", "is a symlink"),
    ("tree --kms-key", "ok", "is not a KMS key"),
])
def test_bad_input_exits_2(env: str, tmp_path: Path, make: str, label: str,
                           needle: str) -> None:
    target = tmp_path / "data"
    if make == "empty":
        target.mkdir()
    elif make == "file":
        target.write_text("x")
    elif make in ("tree", "symlink", "tree --kms-key"):
        _tree(target, files=2, size=10)
        if make == "symlink":
            (target / "link").symlink_to(target / "class0")
    extra = ["--kms-key", "my key\n"] if make.endswith("--kms-key") else []
    result = CliRunner().invoke(cli, ["snapshot-dataset", str(target), "--name", label,
                                      "--region", REGION, "--json", *extra])
    assert result.exit_code == 2, result.output
    assert needle in json.loads(result.stdout)["error"]
    ec2 = boto3.client("ec2", REGION)
    assert not ec2.describe_snapshots(OwnerIds=["self"], Filters=[
        {"Name": "tag:clusterkit:dataset-upload", "Values": [label]}])["Snapshots"]


def test_cli_json_prints_the_result(env: str, tmp_path: Path) -> None:
    label = support.unique_name("ds")
    root = _tree(tmp_path / "data", files=3, size=1000)
    result = CliRunner().invoke(cli, ["snapshot-dataset", str(root), "--name", label,
                                      "--region", REGION, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["snapshot_id"].startswith("snap-") and out["label"] == label
    assert out["source"] == "directory" and out["files"] == 3
    plain = CliRunner().invoke(cli, ["snapshot-dataset", str(root), "--name", label,
                                     "--region", REGION])
    assert plain.exit_code == 0
    assert plain.stdout.strip().splitlines()[-1].startswith("snap-")


def test_cli_kms_key_alias_encrypts_the_snapshot_with_that_key(env: str,
                                                               tmp_path: Path) -> None:
    kms = boto3.client("kms", REGION)
    key = kms.create_key()["KeyMetadata"]
    alias = "alias/" + support.unique_name("ds")
    kms.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
    root = _tree(tmp_path / "data", files=2, size=1000)
    result = CliRunner().invoke(cli, ["snapshot-dataset", str(root), "--name",
                                      support.unique_name("ds"), "--region", REGION,
                                      "--kms-key", alias, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["kms_key"] == key["Arn"]  # StartSnapshot takes a key ARN, never an alias
    snap = _snapshot(out["snapshot_id"])
    assert (snap["Encrypted"], snap["KmsKeyId"], snap["State"]) == (True, key["Arn"],
                                                                    "completed")


def _volume_snapshot(**volume: object) -> str:
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1, **volume)["VolumeId"]
    return ec2.create_snapshot(VolumeId=vol)["SnapshotId"]


def _exists(snapshot_id: str) -> bool:
    ec2 = boto3.client("ec2", REGION)
    return snapshot_id in {s["SnapshotId"] for s in ec2.describe_snapshots(
        OwnerIds=["self"])["Snapshots"]}


def test_a_plaintext_node_snapshot_is_replaced_by_an_encrypted_copy(env: str) -> None:
    """The node form: a volume that is not encrypted gives an encrypted copy, and the
    plaintext snapshot is deleted; an encrypted one is kept as it is, unless another
    key is asked for."""
    plain = _volume_snapshot()
    assert _snapshot(plain)["Encrypted"] is False
    label = support.unique_name("nv")
    copy = publish.ensure_encrypted(runtime(), REGION, plain, label, None)
    snap = _snapshot(copy)
    assert copy != plain and not _exists(plain)
    assert snap["Encrypted"] is True and snap["KmsKeyId"]  # the default EBS key
    assert _tags(copy) == {"clusterkit:dataset-upload": label}  # not usable yet
    assert publish.ensure_encrypted(runtime(), REGION, copy, label, None) == copy
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]
    again = publish.ensure_encrypted(runtime(), REGION, copy, label, key["KeyId"])
    assert _snapshot(again)["KmsKeyId"] == key["Arn"] and not _exists(copy)
    assert publish.ensure_encrypted(runtime(), REGION, again, label, key["Arn"]) == again


def test_a_snapshot_of_an_encrypted_volume_keeps_its_key(env: str) -> None:
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]["Arn"]
    snap = _volume_snapshot(Encrypted=True, KmsKeyId=key)
    assert (_snapshot(snap)["Encrypted"], _snapshot(snap)["KmsKeyId"]) == (True, key)
    assert publish.ensure_encrypted(runtime(), REGION, snap, "x", key) == snap
