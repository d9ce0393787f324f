"""EFS mount targets: one per cluster, in the subnet (AZ) of its nodes; on a file system
the cluster does not own (``storage.efs.file_system_id``), the one already in that subnet
is lent: the cluster's security group is added to it, and taken off by `down`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.plan.mounts import MountTarget

if TYPE_CHECKING:
    import boto3


def _targets(session: boto3.Session, region: str, fs_id: str) -> list[dict[str, Any]]:
    with aws_call("DescribeMountTargets", fs_id):
        return client(session, "efs", region).describe_mount_targets(
            FileSystemId=fs_id)["MountTargets"]


def mount_targets(session: boto3.Session, region: str, fs_id: str) -> tuple[MountTarget, ...]:
    """``fs_id``'s mount targets with their security groups (DescribeMountTargets does not
    give them: one call per target)."""
    return tuple(MountTarget(t["MountTargetId"], t["SubnetId"],
                             target_groups(session, region, t["MountTargetId"]))
                 for t in _targets(session, region, fs_id))


def target_groups(session: boto3.Session, region: str, mt_id: str) -> tuple[str, ...]:
    with aws_call("DescribeMountTargetSecurityGroups", mt_id):
        return tuple(client(session, "efs", region).describe_mount_target_security_groups(
            MountTargetId=mt_id)["SecurityGroups"])


def set_target_groups(session: boto3.Session, region: str, mt_id: str,
                      groups: tuple[str, ...]) -> None:
    """Replace the mount target's security groups (EFS allows five)."""
    with aws_call("ModifyMountTargetSecurityGroups", mt_id):
        client(session, "efs", region).modify_mount_target_security_groups(
            MountTargetId=mt_id, SecurityGroups=list(groups))


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


def targets_exist(session: boto3.Session, region: str, mt_ids: list[str]) -> list[str]:
    """Those of ``mt_ids`` that still exist."""
    left = []
    for mt_id in mt_ids:
        with aws_call("DescribeMountTargets", mt_id, expected={"MountTargetNotFound"}) as call:
            client(session, "efs", region).describe_mount_targets(MountTargetId=mt_id)
        if call.expected_error is None:
            left.append(mt_id)
    return left


def mount_target_ready(session: boto3.Session, region: str, fs_id: str, subnet_id: str) -> bool:
    return any(t["SubnetId"] == subnet_id and t.get("LifeCycleState") == "available"
               for t in _targets(session, region, fs_id))
