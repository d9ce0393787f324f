"""aws.pinned against the emulator over HTTP: where a spec's pinned resources exist."""

from __future__ import annotations

import boto3

from clusterkit.aws.pinned import locate, probe
from clusterkit.aws.session import make_session
from clusterkit.plan.pinning import FOUND, MISSING, PinKind, Pinned
from tests import support
from tests.integration.conftest import AMI, REGION


def _pin(kind: PinKind, ident: str) -> Pinned:
    return Pinned(kind, ident, "spec.key")


def test_found_and_missing(moto_env, tmp_path):
    s = make_session(REGION)
    ec2 = boto3.client("ec2", REGION)
    key = support.unique_name("pin")
    ec2.import_key_pair(KeyName=key, PublicKeyMaterial=support.public_key(
        support.ssh_keygen(tmp_path / "k")).encode())
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    snap = ec2.create_snapshot(VolumeId=vol)["SnapshotId"]
    fs_id = boto3.client("efs", REGION).create_file_system(
        CreationToken=key, Tags=[{"Key": "clusterkit:lend", "Value": "true"}])["FileSystemId"]
    untagged = boto3.client("efs", REGION).create_file_system(
        CreationToken=f"{key}-u")["FileSystemId"]
    assert probe(s, REGION, _pin(PinKind.FILE_SYSTEM, untagged)).startswith(
        "not tagged clusterkit:lend=true (tag it: aws efs tag-resource --resource-id "
        f"{untagged} ")
    for kind, ident in ((PinKind.IMAGE, AMI), (PinKind.KEY_PAIR, key),
                        (PinKind.SNAPSHOT, snap), (PinKind.FILE_SYSTEM, fs_id)):
        assert probe(s, REGION, _pin(kind, ident)) == FOUND, kind
    for kind, ident in ((PinKind.IMAGE, "ami-12345678"), (PinKind.KEY_PAIR, f"{key}-x"),
                        (PinKind.SNAPSHOT, "snap-0123456789abcdef0"),
                        (PinKind.FILE_SYSTEM, "fs-0123456789")):
        assert probe(s, REGION, _pin(kind, ident)) == MISSING, kind


def test_locate_in_every_region(moto_env):
    pin = _pin(PinKind.KEY_PAIR, support.unique_name("nowhere"))
    assert locate(make_session(REGION), [pin], ["us-east-1", "eu-west-1"]) == {
        pin: {"us-east-1": MISSING, "eu-west-1": MISSING}}
