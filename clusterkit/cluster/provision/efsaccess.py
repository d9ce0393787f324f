"""What a node needs to mount the cluster's EFS, made while the nodes boot: the mount
target in the launch's AZ (made just before the launch, waited for just before the
bootstrap) and the nodes' instance profile on each node (made through IAM's API while
the stack's roles are made, associated once it holds its role: the launch does not wait
for it)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws import efs, instances, teardown
from clusterkit.cluster.runtime import Runtime, at_once
from clusterkit.errors import AwsError
from clusterkit.events import Stage
from clusterkit.plan.mounts import MountTarget, give_back, in_subnet, lend
from clusterkit.plan.nodes import Node
from clusterkit.plan.provision import ProvisionRecord, StackRecord


def mount_target(rt: Runtime, stack: StackRecord, subnet: str | None, az: str,
                 existing: Sequence[str] = (), lent: Sequence[MountTarget] = ()) -> None:
    """The EFS mount target in the launch's AZ, made just before the launch so that it
    becomes available while the nodes boot (``mount_ready`` waits for it before the
    bootstrap). Made here, not by the stack: the AZ is each launch attempt's, and moving
    it would need a stack update per fallback (an attempt that found no capacity leaves
    its mount target on the cluster's file system, deleted with it by `down`).
    ``existing``: the subnets where the plan saw one already (nothing is read here);
    ``lent``: on the spec's own file system, its targets as the plan saw them (the one in
    ``subnet`` gets the cluster's security group: ``plan.mounts``)."""
    fs_id = stack.efs_id  # created, or a kept one mounted again
    if not fs_id or not subnet:
        return
    target = in_subnet(lent, subnet)
    if target is not None:
        _lend(rt, stack, target, az)
    elif subnet not in existing and efs.create_mount_target(
            rt.session, stack.region, fs_id, subnet, stack.security_group):
        rt.done(Stage.MOUNT_TARGET, f"created EFS mount target for {fs_id} in {az}")


def _lend(rt: Runtime, stack: StackRecord, target: MountTarget, az: str) -> None:
    try:
        groups = lend(target, stack.security_group)
    except ValueError as exc:
        raise AwsError(f"{exc}: the cluster's nodes cannot be admitted to "
                       f"{stack.efs_id}'s mount target in {az}",
                       "take a security group off it, or mount a file system with a free "
                       "slot; `clusterkit down` deletes what this `up` made") from exc
    if groups is not None:
        efs.set_target_groups(rt.session, stack.region, target.mount_target_id, groups)
        rt.done(Stage.MOUNT_TARGET, f"lent {stack.efs_id}'s mount target "
                f"{target.mount_target_id} in {az} to the cluster (its security group "
                f"{stack.security_group} added)")


def mount_ready(rt: Runtime, made: ProvisionRecord, deadline: float) -> None:
    """Wait until the mount target ``provision`` created is available: before the
    bootstrap mounts EFS, after the SSH wait it overlapped with."""
    fs_id, subnet, region = made.stack.efs_id, made.efs_subnet, made.region
    if not fs_id or not subnet:
        return
    rt.wait_until(lambda: (efs.mount_target_ready(rt.session, region, fs_id, subnet), None),
                  deadline=deadline, late=lambda _: AwsError(
                      f"EFS mount target of {fs_id} not available in time",
                      "run `clusterkit up` again to resume"))


def give_profile(rt: Runtime, stack: StackRecord, nodes: Sequence[Node],
                 deadline: float | None = None) -> None:
    """The nodes' instance profile (``plan.profiles``, named by the stack) on each node
    without one, when the cluster has EFS (the nodes' role grants its mount and nothing
    else: without EFS no node needs it). A profile made seconds ago is not yet known to
    EC2 (IAM's propagation): each node is tried again until ``deadline`` (None: two
    minutes, AWS's own longest wait for it)."""
    lacking = [n.instance_id for n in nodes if not n.instance_profile]
    if not stack.efs_id or not stack.instance_profile or not lacking:
        return
    left = list(lacking)

    def round_() -> tuple[bool, list[str]]:
        given = at_once(left, lambda iid: instances.try_associate_instance_profile(
            rt.session, stack.region, iid, stack.instance_profile))
        left[:] = [iid for iid, ok in zip(list(left), given, strict=True) if not ok]
        return not left, left

    rt.wait_until(round_, deadline=deadline if deadline is not None else rt.clock() + 120.0,
                  first=0.5, late=lambda still: AwsError(
                      f"the instance profile {stack.instance_profile} is still unknown to "
                      f"EC2 for {', '.join(still)} (IAM's propagation)",
                      "run `clusterkit up` again to resume"))
    rt.done(Stage.STACK, f"instance profile given to {len(lacking)} node(s) for "
            f"EFS: {', '.join(lacking)}")


def lent_to(rt: Runtime, region: str, fs_id: str, groups: Sequence[str]) -> list[str]:
    """The mount targets of ``fs_id`` (a file system the cluster does not own) that hold
    one of the cluster's security ``groups``: what `down` gives back."""
    if not fs_id or not groups:
        return []
    return [t.mount_target_id for t in efs.mount_targets(rt.session, region, fs_id)
            if set(t.groups) & set(groups)]


def give_back_all(rt: Runtime, region: str, planned: Sequence[str], groups: Sequence[str],
                  deadline: float) -> list[str]:
    """Take the cluster's ``groups`` off each ``planned`` mount target (read again: the
    user may have changed it); delete one left with no other group (clusterkit made it)
    and wait until it is gone (it holds the group the stack deletes). The ids deleted."""
    deleted = []
    for mt_id in planned:
        kept = give_back(MountTarget(mt_id, "", efs.target_groups(rt.session, region, mt_id)),
                         groups)
        if kept is None:
            continue
        if kept:
            efs.set_target_groups(rt.session, region, mt_id, kept)
            rt.done(Stage.DOWN, f"gave back EFS mount target {mt_id} (the cluster's "
                    "security group taken off)")
        else:
            teardown.delete_mount_target(rt.session, region, mt_id)
            rt.done(Stage.DOWN, f"deleted EFS mount target {mt_id} (made by clusterkit on "
                    "a file system it does not own)")
            deleted.append(mt_id)

    def gone() -> tuple[bool, list[str]]:
        left = efs.targets_exist(rt.session, region, deleted)
        return not left, left

    if deleted:
        rt.wait_until(gone, deadline=deadline, late=lambda left: AwsError(
            f"EFS mount targets {', '.join(left)} not deleted in time",
            "run `clusterkit down` again"))
    return deleted
