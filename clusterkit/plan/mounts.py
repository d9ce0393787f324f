"""EFS mount targets on a file system the cluster does not own (``storage.efs.
file_system_id``): the one already in the nodes' subnet is lent to the cluster, not made
(a new mount target is a minute or more of AWS's; one already there is seconds), by adding
the cluster's security group to it (the nodes' NFS traffic is allowed within that group);
`down` takes the group off again and deletes only a mount target that has no other group
(clusterkit made it, in an AZ where the file system had none). PURE."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

# EFS's limit on a mount target's security groups
MAX_GROUPS = 5
# The tag that lets clusterkit lend a file system of yours (its IAM policy allows the
# mount target calls on your file systems only where it is "true"): you opt each one in.
LEND_TAG = "clusterkit:lend"
LEND_HINT = (f"tag it: aws efs tag-resource --resource-id FS --tags Key={LEND_TAG},Value=true "
             "(clusterkit then lends its mount target in the nodes' AZ to the cluster, or "
             "makes one there)")


@dataclass(frozen=True)
class MountTarget:
    """One mount target as DescribeMountTargets and DescribeMountTargetSecurityGroups
    showed it."""

    mount_target_id: str
    subnet_id: str
    groups: tuple[str, ...] = ()


def in_subnet(targets: Sequence[MountTarget], subnet: str | None) -> MountTarget | None:
    return next((t for t in targets if t.subnet_id == subnet), None) if subnet else None


def lend(target: MountTarget, group: str) -> tuple[str, ...] | None:
    """The groups ``target`` gets to admit the cluster's ``group``; None when it has it.
    A ValueError when EFS's five are taken (the user frees one, or opens NFS to the
    cluster in one of them)."""
    if group in target.groups:
        return None
    if len(target.groups) >= MAX_GROUPS:
        raise ValueError(f"EFS mount target {target.mount_target_id} has "
                         f"{MAX_GROUPS} security groups, EFS's most")
    return (*target.groups, group)


def give_back(target: MountTarget, groups: Collection[str]) -> tuple[str, ...] | None:
    """The groups ``target`` keeps when the cluster's ``groups`` are taken off; () when
    it had no other (clusterkit made it: `down` deletes it); None when it has none of
    them."""
    if not set(target.groups) & set(groups):
        return None
    return tuple(g for g in target.groups if g not in groups)
