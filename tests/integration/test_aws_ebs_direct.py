"""aws.ebs_direct against moto's EBS direct APIs (real HTTP on 127.0.0.1), with the
sandbox's gap patch (snapshot `pending` until CompleteSnapshot). moto accepts anything
(wrong checksums, any index), so every test reads blocks back and compares bytes."""

from __future__ import annotations

import os
from pathlib import Path

import boto3
import pytest

from clusterkit.aws import ebs_direct as ed
from clusterkit_sandbox import ebs_direct as sandbox_ebs
from tests.integration.conftest import REGION

B = ed.BLOCK_SIZE


@pytest.fixture
def session(moto_env: str) -> boto3.Session:
    sandbox_ebs.install()  # pending until complete; no image files outside the sandbox
    return boto3.Session(region_name=REGION)


def _image(path: Path, blocks: dict[int, bytes], size_blocks: int = 2048) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size_blocks * B)
        for index, data in blocks.items():
            handle.seek(index * B)
            handle.write(data)
    return path


def _state(snapshot_id: str) -> str:
    ec2 = boto3.client("ec2", REGION)
    return ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]["State"]


def test_upload_puts_data_blocks_only_and_reads_back(session: boto3.Session,
                                                     tmp_path: Path) -> None:
    data = {0: os.urandom(B), 5: os.urandom(B), 6: bytes(B), 2047: b"tail" * (B // 4)}
    image = _image(tmp_path / "img", data)
    snap = ed.start_snapshot(session, REGION, 1, {"clusterkit:dataset-upload": "t1"},
                             "test", "token-1")
    assert _state(snap) == "pending"
    seen: list[ed.UploadProgress] = []
    stats = ed.upload_image(session, REGION, snap, str(image), threads=4,
                            progress=seen.append)
    assert (stats.blocks_put, stats.blocks_skipped) == (3, 2045)  # block 6 is all zero
    assert stats.bytes_put == 3 * B
    assert seen[-1].blocks_done == seen[-1].blocks_total and seen[-1].bytes_done == 3 * B
    listed = ed.list_blocks(session, REGION, snap)
    assert sorted(listed) == [0, 5, 2047]
    for index in (0, 2047):
        assert ed.get_block(session, REGION, snap, index, listed[index]) == data[index]
    assert _state(snap) == "pending"
    assert ed.complete_snapshot(session, REGION, snap, stats.blocks_put) == "completed"
    assert _state(snap) == "completed"


def test_no_skipping_puts_every_block(session: boto3.Session, tmp_path: Path) -> None:
    image = _image(tmp_path / "img", {1: os.urandom(B)}, size_blocks=8)
    snap = ed.start_snapshot(session, REGION, 1, {}, "test", "token-2")
    stats = ed.upload_image(session, REGION, snap, str(image), threads=1, skip_zero=False)
    assert (stats.blocks_put, stats.blocks_skipped) == (8, 0)
    assert sorted(ed.list_blocks(session, REGION, snap)) == list(range(8))


def test_an_exception_from_progress_stops_the_upload(session: boto3.Session,
                                                     tmp_path: Path) -> None:
    image = _image(tmp_path / "img", {i: os.urandom(B) for i in range(200)})
    snap = ed.start_snapshot(session, REGION, 1, {}, "test", "token-3")

    def stop(progress: ed.UploadProgress) -> None:
        if progress.blocks_done >= 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ed.upload_image(session, REGION, snap, str(image), threads=2, progress=stop)
    assert 20 <= len(ed.list_blocks(session, REGION, snap)) < 200
    assert _state(snap) == "pending"


def _encryption(snapshot_id: str) -> tuple[bool, str | None]:
    raw = boto3.client("ec2", REGION).describe_snapshots(SnapshotIds=[snapshot_id])[
        "Snapshots"][0]
    return raw["Encrypted"], raw.get("KmsKeyId")


def test_a_snapshot_is_started_encrypted_with_the_key_named(session: boto3.Session) -> None:
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]["Arn"]
    snap = ed.start_snapshot(session, REGION, 1, {}, "test", "token-k1", kms_key_arn=key)
    assert _encryption(snap) == (True, key)
    ed.complete_snapshot(session, REGION, snap, 0)
    assert _encryption(snap) == (True, key) and _state(snap) == "completed"


def test_without_a_key_the_default_ebs_key_encrypts(session: boto3.Session) -> None:
    snap = ed.start_snapshot(session, REGION, 1, {}, "test", "token-k2")
    encrypted, key = _encryption(snap)
    default = boto3.client("kms", REGION).describe_key(KeyId="alias/aws/ebs")["KeyMetadata"]
    assert encrypted is True and key == default["Arn"]


def test_an_alias_is_not_a_key_arn_for_start_snapshot(session: boto3.Session) -> None:
    from clusterkit.errors import AwsError

    with pytest.raises(AwsError, match="StartSnapshot"):
        ed.start_snapshot(session, REGION, 1, {}, "test", "token-k3", kms_key_arn="alias/x")
