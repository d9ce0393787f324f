"""The AWS writes apply makes for a plan when its first candidate has capacity, by
operation: what the saved-plan cases check (tests/unit/saved_plan_cases/: a saved plan
in, the calls out), and what `up`'s own calls are held to (tests/integration/
test_up_plan_apply.py). PURE."""

from __future__ import annotations

from collections import Counter

from clusterkit.kinds import KeyPairAction, StackAction
from clusterkit.plan.applied import pending_roles, profiles_lacking
from clusterkit.plan.launch import launch_parts
from clusterkit.plan.mounts import MountTarget, in_subnet
from clusterkit.plan.up import UpPlan

STACK_CALLS = {StackAction.CREATE: ("CreateStack",), StackAction.UPDATE: ("UpdateStack",),
               StackAction.RECREATE: ("DeleteStack", "CreateStack"), StackAction.NONE: ()}


def apply_calls(plan: UpPlan) -> Counter[str]:
    """The AWS writes apply makes when the first candidate has capacity, by operation."""
    calls: Counter[str] = Counter()
    own = plan.regions[0] if plan.regions else None
    if plan.key_pair == KeyPairAction.IMPORT:
        calls["ImportKeyPair"] += 1
    calls.update(STACK_CALLS[own.action if own else plan.stack])
    calls["TerminateInstances"] += 1 if plan.nodes.terminate else 0
    calls["StartInstances"] += 1 if plan.nodes.start else 0
    first = plan.candidates[0] if plan.nodes.launch and plan.candidates else None
    if first is not None and plan.spec is not None:
        calls["RunInstances"] += len(launch_parts(plan.spec, first, plan.nodes.launch))
    calls["CreateTags"] += len(plan.nodes.retag) + len(pending_roles(plan))
    calls["CreateMountTarget"] += _mount_call(plan, first.az if first else None)
    calls["ModifyMountTargetSecurityGroups"] += 1 if lent_target(
        plan, first.az if first else None) else 0
    calls["AssociateIamInstanceProfile"] += profiles_lacking(plan)
    calls.update(c for step in plan.profiles if step.region == plan.region
                 for c in step.calls())
    return +calls


def _nodes_subnet(plan: UpPlan, az: str | None) -> str | None:
    """The subnet the nodes use: the launch's AZ's, or the running nodes'."""
    own = plan.regions[0] if plan.regions else None
    if az is not None:
        return own.subnets.get(az) if own else None
    return next((n.subnet_id for n in plan.existing if n.live and n.subnet_id), None)


def _mount_call(plan: UpPlan, az: str | None) -> int:
    """1 when apply makes a mount target: the cluster mounts EFS and none is in the
    subnet the nodes use."""
    if plan.spec is None or plan.spec.storage.efs is None:
        return 0
    return 0 if _nodes_subnet(plan, az) in plan.mount_targets else 1


def lent_target(plan: UpPlan, az: str | None) -> MountTarget | None:
    """The mount target apply lends the cluster's security group to: the spec's own file
    system's, in the nodes' subnet, when it lacks the group (``plan.mounts``)."""
    target = in_subnet(plan.lent_targets, _nodes_subnet(plan, az))
    if target is None or (plan.security_group and plan.security_group in target.groups):
        return None
    return target
