"""EFS mount targets: one per cluster, in the subnet (AZ) of its nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call

if TYPE_CHECKING:
    import boto3


def _targets(session: boto3.Session, region: str, fs_id: str) -> list[dict[str, Any]]:
    with aws_call("DescribeMountTargets", fs_id):
        return client(session, "efs", region).describe_mount_targets(
            FileSystemId=fs_id)["MountTargets"]


def mount_target_subnets(session: boto3.Session, region: str, fs_id: str) -> list[str]:
    """The subnets where ``fs_id`` has a mount target."""
    return [t["SubnetId"] for t in _targets(session, region, fs_id)]


def create_mount_target(session: boto3.Session, region: str, fs_id: str, subnet_id: str,
                        security_group: str) -> bool:
    """Create the mount target in ``subnet_id``; False when one was there already."""
    with aws_call("CreateMountTarget", fs_id, expected={"MountTargetConflict"}) as call:
        client(session, "efs", region).create_mount_target(
            FileSystemId=fs_id, SubnetId=subnet_id, SecurityGroups=[security_group])
    return call.expected_error is None


def ensure_mount_target(session: boto3.Session, region: str, fs_id: str, subnet_id: str,
                        security_group: str) -> bool:
    """Create the mount target in ``subnet_id`` unless there is one; True if created."""
    if subnet_id in mount_target_subnets(session, region, fs_id):
        return False
    return create_mount_target(session, region, fs_id, subnet_id, security_group)


def mount_target_ready(session: boto3.Session, region: str, fs_id: str, subnet_id: str) -> bool:
    return any(t["SubnetId"] == subnet_id and t.get("LifeCycleState") == "available"
               for t in _targets(session, region, fs_id))
