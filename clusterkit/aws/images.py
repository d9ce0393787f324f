"""The AMIs clusterkit builds (`clusterkit image build`): CreateImage, DescribeImages of
the account's own by clusterkit's tags, DeregisterImage and its snapshots. Thin: each
function one EC2 verb or read, plain records back (plan.images decides)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import tag_specs, to_dict
from clusterkit.plan.images import DIGEST_TAG, BuiltImage, ImageCandidate

if TYPE_CHECKING:
    import boto3


def _built(raw: Mapping[str, Any]) -> BuiltImage:
    return BuiltImage(ImageCandidate(raw["ImageId"], raw.get("Name", ""),
                                     raw.get("CreationDate", ""), raw.get("RootDeviceName")),
                      to_dict(raw.get("Tags")), raw.get("State", ""))


def snapshots_of(raw: Mapping[str, Any]) -> list[str]:
    return [m["Ebs"]["SnapshotId"] for m in raw.get("BlockDeviceMappings", [])
            if m.get("Ebs", {}).get("SnapshotId")]


def built_images(session: boto3.Session, region: str) -> list[BuiltImage]:
    """Every AMI of this account that clusterkit built (it carries DIGEST_TAG)."""
    with aws_call("DescribeImages", region):
        found = client(session, "ec2", region).describe_images(
            Owners=["self"], Filters=[{"Name": "tag-key", "Values": [DIGEST_TAG]}])["Images"]
    return [_built(i) for i in found if DIGEST_TAG in to_dict(i.get("Tags"))]


def describe(session: boto3.Session, region: str, image_id: str) -> tuple[BuiltImage, list[str]] | None:
    """The image and its snapshots (None: no such image)."""
    with aws_call("DescribeImages", image_id):
        found = client(session, "ec2", region).describe_images(
            Filters=[{"Name": "image-id", "Values": [image_id]}])["Images"]
    return (_built(found[0]), snapshots_of(found[0])) if found else None


def create_image(session: boto3.Session, region: str, instance_id: str, name: str,
                 tags: Mapping[str, str]) -> str:
    """CreateImage of ``instance_id`` (NoReboot: its steps are done and nothing writes),
    the image and its snapshot tagged at creation (IAM lets the user delete only what
    carries clusterkit's image tag)."""
    with aws_call("CreateImage", instance_id):
        return client(session, "ec2", region).create_image(
            InstanceId=instance_id, Name=name, NoReboot=True,
            Description="clusterkit image build", TagSpecifications=tag_specs(
                ["image", "snapshot"], tags))["ImageId"]


def deregister(session: boto3.Session, region: str, image_id: str,
               snapshots: list[str]) -> None:
    """DeregisterImage, then DeleteSnapshot of each of its snapshots (an AMI's snapshot
    outlives it and is billed otherwise)."""
    ec2 = client(session, "ec2", region)
    with aws_call("DeregisterImage", image_id):
        ec2.deregister_image(ImageId=image_id)
    for snapshot in snapshots:
        with aws_call("DeleteSnapshot", snapshot):
            ec2.delete_snapshot(SnapshotId=snapshot)
