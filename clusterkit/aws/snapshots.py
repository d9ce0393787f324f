"""EC2 verbs on dataset snapshots that `snapshot-dataset` needs besides the EBS direct
APIs: find by tag, tag, delete, snapshot a node's volume. (Describing one snapshot is
aws.volumes.describe_snapshot.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import tag_specs, to_list
from clusterkit.aws.volumes import to_snapshot
from clusterkit.plan.dataset import Snapshot

if TYPE_CHECKING:
    import boto3


def tagged_snapshots(session: boto3.Session, region: str, key: str,
                     value: str) -> list[Snapshot]:
    """This account's snapshots whose tag ``key`` is ``value``."""
    with aws_call("DescribeSnapshots", f"{key}={value}"):
        pages = client(session, "ec2", region).get_paginator("describe_snapshots").paginate(
            OwnerIds=["self"], Filters=[{"Name": f"tag:{key}", "Values": [value]}])
        return [to_snapshot(s, region) for page in pages for s in page["Snapshots"]]


def tag_snapshot(session: boto3.Session, region: str, snapshot_id: str,
                 tags: Mapping[str, str]) -> None:
    with aws_call("CreateTags", snapshot_id):
        client(session, "ec2", region).create_tags(Resources=[snapshot_id],
                                                    Tags=to_list(tags))


def delete_snapshot(session: boto3.Session, region: str, snapshot_id: str) -> bool:
    """False when it is already gone."""
    with aws_call("DeleteSnapshot", snapshot_id,
                  expected={"InvalidSnapshot.NotFound"}) as call:
        client(session, "ec2", region).delete_snapshot(SnapshotId=snapshot_id)
    return call.expected_error is None


def snapshot_volume(session: boto3.Session, region: str, volume_id: str, description: str,
                    tags: Mapping[str, str]) -> str:
    """CreateSnapshot of a volume (tagged at creation); the new snapshot's id."""
    with aws_call("CreateSnapshot", volume_id):
        out = client(session, "ec2", region).create_snapshot(
            VolumeId=volume_id, Description=description,
            TagSpecifications=tag_specs(["snapshot"], tags))
    return str(out["SnapshotId"])


def encryption(session: boto3.Session, region: str, snapshot_id: str) -> tuple[bool, str | None]:
    """(encrypted, KMS key id or ARN) of the snapshot."""
    with aws_call("DescribeSnapshots", snapshot_id):
        raw = client(session, "ec2", region).describe_snapshots(
            SnapshotIds=[snapshot_id])["Snapshots"][0]
    return bool(raw.get("Encrypted")), raw.get("KmsKeyId") or None


def copy_encrypted(session: boto3.Session, region: str, snapshot_id: str, description: str,
                   tags: Mapping[str, str], kms_key: str | None = None) -> str:
    """CopySnapshot into an encrypted snapshot in the same region (with ``kms_key``, else
    the account's default EBS key), tagged at creation; the copy's id."""
    extra = {"KmsKeyId": kms_key} if kms_key else {}
    with aws_call("CopySnapshot", snapshot_id):
        out = client(session, "ec2", region).copy_snapshot(
            SourceSnapshotId=snapshot_id, SourceRegion=region, Description=description,
            Encrypted=True, TagSpecifications=tag_specs(["snapshot"], tags), **extra)
    return str(out["SnapshotId"])
