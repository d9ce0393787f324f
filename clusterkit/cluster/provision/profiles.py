"""The cluster's instance profiles, made through IAM's API as the plan says
(``plan.profiles``): created once the launch is away (the nodes boot meanwhile), given
the stack's role once the stack is complete; `down` deletes them before the stack (a
role in a profile cannot be deleted: CloudFormation's delete of it would fail)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws import iamprofiles, teardown
from clusterkit.cluster.runtime import Runtime, at_once
from clusterkit.errors import ClusterkitError
from clusterkit.events import Kind, Stage
from clusterkit.plan.profiles import (
    ROLE_OUTPUTS,
    ProfileStep,
    iam_path,
    profile_names,
    profile_tags,
)
from clusterkit.plan.provision import StackRecord


def _here(steps: Sequence[ProfileStep], region: str) -> list[ProfileStep]:
    return [s for s in steps if s.region == region]


def create(rt: Runtime, cluster: str, steps: Sequence[ProfileStep], region: str) -> None:
    """The profiles ``steps`` create in ``region`` (the launch's), tagged for the cluster
    under its IAM path, both at once."""
    todo = [s for s in _here(steps, region) if s.create]
    at_once(todo, lambda s: iamprofiles.create_profile(
        rt.session, s.name, iam_path(cluster), profile_tags(cluster, region), region))
    if todo:
        rt.done(Stage.STACK, f"instance profile(s) {', '.join(s.name for s in todo)} "
                "created through IAM's API")


def add_roles(rt: Runtime, steps: Sequence[ProfileStep], stack: StackRecord) -> None:
    """Each profile of ``stack``'s region gets its role, named by the complete stack."""
    todo = [s for s in _here(steps, stack.region) if s.add_role]
    for step in todo:
        if not stack.outputs.get(ROLE_OUTPUTS[step.kind]):
            raise ClusterkitError(f"the stack names no {ROLE_OUTPUTS[step.kind]} for the "
                                  f"instance profile {step.name}",
                                  "run `clusterkit up` again: it updates the stack")
    at_once(todo, lambda s: iamprofiles.add_role(
        rt.session, s.name, stack.outputs[ROLE_OUTPUTS[s.kind]], stack.region))
    if todo:
        rt.done(Stage.STACK, f"the stack's roles added to {', '.join(s.name for s in todo)}")


def delete(rt: Runtime, cluster: str, region: str) -> None:
    """The region's profiles gone (their roles taken out first), before its stack's
    delete: a role still in a profile cannot be deleted. Nothing when there are none."""
    def gone(name: str) -> None:
        if teardown.delete_instance_profile(rt.session, name, region):
            rt.emit(Kind.PROGRESS, f"deleted instance profile {name}", stage=Stage.DOWN,
                    level=1)

    at_once(list(profile_names(cluster, region)), gone)
