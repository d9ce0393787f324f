"""aws.snapshots against the emulator over HTTP: a node volume's snapshot tagged at
creation and found by its tag, tagged again, copied encrypted (with a key or the default
one; the sandbox's patch of moto, which ignores Encrypted on a copy), and deleted,
"already gone" being no error."""

from __future__ import annotations

import boto3

from clusterkit.aws import snapshots
from clusterkit.aws.session import make_session
from clusterkit_sandbox import ebs_direct as sandbox_ebs
from tests import support
from tests.integration.conftest import REGION


def _volume(ec2, encrypted: bool = False) -> str:
    return ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1,
                             Encrypted=encrypted)["VolumeId"]


def test_snapshot_a_volume_find_it_by_tag_tag_it_and_delete_it(moto_env):
    s, label = make_session(REGION), support.unique_name("ds")
    ec2 = boto3.client("ec2", REGION)
    snap = snapshots.snapshot_volume(s, REGION, _volume(ec2), "dataset of worker-1",
                                     {"clusterkit:dataset-upload": label})
    assert snap.startswith("snap-")
    (found,) = snapshots.tagged_snapshots(s, REGION, "clusterkit:dataset-upload", label)
    assert found.snapshot_id == snap
    assert snapshots.tagged_snapshots(s, REGION, "clusterkit:dataset", label) == []
    snapshots.tag_snapshot(s, REGION, snap, {"clusterkit:dataset": label})
    assert [x.snapshot_id for x in
            snapshots.tagged_snapshots(s, REGION, "clusterkit:dataset", label)] == [snap]
    assert snapshots.delete_snapshot(s, REGION, snap) is True
    assert snapshots.delete_snapshot(s, REGION, snap) is False  # InvalidSnapshot.NotFound
    assert snapshots.tagged_snapshots(s, REGION, "clusterkit:dataset", label) == []


def test_a_plaintext_snapshot_is_copied_encrypted_and_tagged(moto_env):
    sandbox_ebs.install()  # the sandbox's emulator: CopySnapshot's Encrypted as AWS does
    s, label = make_session(REGION), support.unique_name("enc")
    ec2, kms = boto3.client("ec2", REGION), boto3.client("kms", REGION)
    plain = snapshots.snapshot_volume(s, REGION, _volume(ec2), "plain", {})
    assert snapshots.encryption(s, REGION, plain) == (False, None)
    key = kms.create_key()["KeyMetadata"]["Arn"]
    copy = snapshots.copy_encrypted(s, REGION, plain, "encrypted", {"clusterkit:dataset": label},
                                    kms_key=key)
    assert copy != plain
    encrypted, used = snapshots.encryption(s, REGION, copy)
    assert encrypted and used is not None and used.split("/")[-1] == key.split("/")[-1]
    assert [x.snapshot_id for x in
            snapshots.tagged_snapshots(s, REGION, "clusterkit:dataset", label)] == [copy]
    default = snapshots.copy_encrypted(s, REGION, plain, "default key", {})
    assert snapshots.encryption(s, REGION, default)[0] is True
