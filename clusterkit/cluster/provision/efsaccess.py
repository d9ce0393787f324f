"""What a node needs to mount the cluster's EFS, made while the nodes boot: the mount
target in the launch's AZ (made just before the launch, waited for just before the
bootstrap) and the nodes' instance profile on each node (made through IAM's API while
the stack's roles are made, associated once it holds its role: the launch does not wait
for it)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws import efs, instances
from clusterkit.cluster.runtime import Runtime, at_once
from clusterkit.errors import AwsError
from clusterkit.events import Stage
from clusterkit.plan.nodes import Node
from clusterkit.plan.provision import ProvisionRecord, StackRecord


def mount_target(rt: Runtime, stack: StackRecord, subnet: str | None, az: str,
                 existing: Sequence[str] = ()) -> None:
    """The EFS mount target in the launch's AZ, made just before the launch so that it
    becomes available while the nodes boot (``mount_ready`` waits for it before the
    bootstrap). Made here, not by the stack: the AZ is each launch attempt's, and moving
    it would need a stack update per fallback (an attempt that found no capacity leaves
    its mount target on the cluster's file system, deleted with it by `down`).
    ``existing``: the subnets where the plan saw one already (nothing is read here)."""
    fs_id = stack.efs_id  # created, or a kept one mounted again
    if not fs_id or not subnet or subnet in existing:
        return
    if efs.create_mount_target(rt.session, stack.region, fs_id, subnet, stack.security_group):
        rt.done(Stage.MOUNT_TARGET, f"created EFS mount target for {fs_id} in {az}")


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
