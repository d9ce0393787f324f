"""Apply's whole work in a plan, as `plan` shows it (the AWS writes it makes:
``plan.applycalls``). Each line names something apply does that the spend
lines do not: every stack parameter and the role the stack calls run as, each
fallback region's preparation, the EFS mount target, the role tags, the bootstrap
steps. PURE."""

from __future__ import annotations

from clusterkit.kinds import Role, StackAction
from clusterkit.plan.nodes import ROLE_TAG, launch_tags, role_of
from clusterkit.plan.up import UpPlan


def _stack_lines(plan: UpPlan) -> list[str]:
    """Each region's key pair and stack parameters: the own region's, then the fallbacks'."""
    lines: list[str] = []
    for i, region in enumerate(plan.regions):
        work = region.lines()
        if i and work:
            work = [f"if the launch falls back to {region.region}: {line}" for line in work]
        elif not i:
            work = [line for line in work if not line.startswith("import ")]  # said above
        lines += work
    changing = any(r.action != StackAction.NONE for r in plan.regions)
    if changing and plan.role is not None:
        lines.append(f"the stack calls run {plan.role.describe()}")
        if plan.role.warning:
            lines.append(f"warning: {plan.role.warning}")
    return lines


def _mount_lines(plan: UpPlan) -> list[str]:
    spec = plan.spec
    if spec is None or spec.storage.efs is None:
        return []
    where = "in the launch's AZ" if plan.nodes.launch else "in the nodes' subnet"
    there = f" (one exists in {', '.join(plan.mount_targets)})" if plan.mount_targets else ""
    lines = [f"EFS mount target: made {where} unless there is one{there}"]
    if spec.storage.efs.file_system_id and plan.lent_targets:
        lines.append(f"the file system is yours ({spec.storage.efs.file_system_id}): its mount "
                     "target there is lent to the cluster (the cluster's security group "
                     "added to it; `down` takes it off)")
    lacking = profiles_lacking(plan)
    lines += [step.line() if step.region == plan.region else
              f"if the launch falls back to {step.region}: {step.line()}"
              for step in plan.profiles]
    if lacking:
        lines.append(f"the nodes' instance profile (its EFS mount) given to {lacking} "
                     "node(s) once it has the stack's role (retried through IAM's "
                     "propagation)")
    return lines


def profiles_lacking(plan: UpPlan) -> int:
    """The nodes without the stack's instance profile when the cluster mounts EFS (the
    new ones launch without it: the stack makes it as they boot)."""
    if plan.spec is None or plan.spec.storage.efs is None:
        return 0
    return len(plan.nodes.launch) + len([n for n in plan.kept if not n.instance_profile])


def pending_roles(plan: UpPlan) -> dict[Role, list[int]]:
    """The new nodes' roles a launch of several roles leaves to write, by index."""
    if not plan.nodes.launch or launch_tags(plan.cluster, plan.nodes.launch).get(
            ROLE_TAG) != Role.PENDING:
        return {}
    roles: dict[Role, list[int]] = {}
    for index in plan.nodes.launch:
        roles.setdefault(role_of(index), []).append(index)
    return roles


def _tag_lines(plan: UpPlan) -> list[str]:
    lines = [f"role tags {dict(g.tags).get(ROLE_TAG)} on {', '.join(g.instance_ids)}"
             + (f" and {len(g.volume_ids)} root volume(s)" if g.volume_ids else "")
             for g in plan.nodes.retag]
    lines += [f"role tag {role} on the new node(s) of index {', '.join(map(str, slots))}, "
              "after the launch" for role, slots in pending_roles(plan).items()]
    return lines


def _step_lines(plan: UpPlan) -> list[str]:
    if not plan.steps:
        return []
    kept = len(plan.kept)
    who = [f"{len(plan.nodes.launch)} new node(s) run each"] if plan.nodes.launch else []
    who += [f"{kept} running node(s) only those their receipts do not show done"] \
        if kept else []
    return [f"bootstrap steps: {', '.join(plan.steps)} ({'; '.join(who)})"] if who else []


def apply_lines(plan: UpPlan) -> list[str]:
    """What apply does beyond the spend lines, as `plan` prints it."""
    if not plan.mutates:
        return []
    return [*_stack_lines(plan), *_mount_lines(plan), *_tag_lines(plan), *_step_lines(plan)]
