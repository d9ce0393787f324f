"""What a node needs to mount the cluster's EFS, made while the nodes boot: the mount
target in the launch's AZ (made just before the launch, waited for just before the
bootstrap) and the stack's instance profile on each node (associated once the stack is
complete: the launch does not wait for it)."""

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


def give_profile(rt: Runtime, stack: StackRecord, nodes: Sequence[Node]) -> None:
    """The stack's instance profile on each node without one, when the cluster has EFS
    (the nodes' role grants its mount and nothing else: without EFS no node needs it)."""
    lacking = [n.instance_id for n in nodes if not n.instance_profile]
    if not stack.efs_id or not stack.instance_profile or not lacking:
        return
    at_once(lacking, lambda iid: instances.associate_instance_profile(
        rt.session, stack.region, iid, stack.instance_profile))
    rt.done(Stage.STACK, f"instance profile given to {len(lacking)} node(s) for "
            f"EFS: {', '.join(lacking)}")
