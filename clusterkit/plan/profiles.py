"""The cluster's instance profiles, made through IAM's own API, not by its stack. PURE.

CloudFormation holds a new ``AWS::IAM::InstanceProfile`` for about two minutes (IAM's
propagation, hard-coded: ``sandbox/clusterkit_sandbox/timings.py``), which every `up` of
a new cluster paid before its nodes could mount EFS. The roles stay in the stack, with
their policies and the service role's permissions boundary; a profile is only a
container that lets EC2 hand a role to an instance, so `up` makes it with
CreateInstanceProfile and AddRoleToInstanceProfile (seconds) once the stack's role exists,
and the association retries through IAM's propagation. Each region's stack has its
own pair, named for the cluster and the region (IAM is global), under the cluster's IAM
path and tagged for it, so `down` finds and deletes them as it does the roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from clusterkit.plan.nodes import CLUSTER_TAG, REGION_TAG
from clusterkit.spec.model import Spec


class ProfileKind(str, Enum):
    """Whose role a profile holds: the nodes' (EFS client) or the recovery controller's
    (the master's while a detached job may recover)."""

    NODE = "node"
    CONTROLLER = "controller"


# the stack output naming the role each kind's profile holds
ROLE_OUTPUTS = {ProfileKind.NODE: "NodeRoleName", ProfileKind.CONTROLLER: "ControllerRoleName"}


def iam_path(cluster: str) -> str:
    """The IAM path of the cluster's roles and profiles (how `down` finds them)."""
    return f"/clusterkit/{cluster}/"


def profile_name(cluster: str, region: str, kind: ProfileKind) -> str:
    """The profile of ``kind`` for the cluster's stack in ``region`` (the template's
    outputs InstanceProfileArn and ControllerProfileArn name the same)."""
    return f"clusterkit-{cluster}-{region}-{kind.value}"


def profile_names(cluster: str, region: str) -> tuple[str, ...]:
    return tuple(profile_name(cluster, region, k) for k in ProfileKind)


def profile_tags(cluster: str, region: str) -> dict[str, str]:
    return {CLUSTER_TAG: cluster, REGION_TAG: region}


@dataclass(frozen=True)
class ProfileStep:
    """One profile `up` makes or completes in ``region``: created (``create``) and given
    its role from the stack's ``ROLE_OUTPUTS`` once the stack is complete (``add_role``)."""

    region: str
    kind: ProfileKind
    name: str
    create: bool
    add_role: bool

    def calls(self) -> tuple[str, ...]:
        """The IAM writes it makes."""
        return (("CreateInstanceProfile",) if self.create else ()) + \
            (("AddRoleToInstanceProfile",) if self.add_role else ())

    def line(self) -> str:
        what = "create" if self.create else "complete"
        return (f"instance profile {self.name}: {what} through IAM's API, the stack's "
                f"{ROLE_OUTPUTS[self.kind]} added once the stack is complete")


def plan_profiles(spec: Spec, regions: Sequence[str],
                  seen: Mapping[str, Sequence[str]]) -> tuple[ProfileStep, ...]:
    """The profiles to make in ``regions`` (the plan's, own first), from the cluster's
    profiles as observed (``seen``: name -> the roles it holds). Every cluster has both,
    as the stack made them before: the controller's serves any detached job's controller
    (a spending cap needs no EFS), and the nodes' is what the controller gives the master
    back as it exits (a node wears it only when the cluster mounts EFS: ``efsaccess``)."""
    steps = []
    for region in regions:
        for kind in ProfileKind:
            name = profile_name(spec.name, region, kind)
            roles = seen.get(name)
            if roles is None or not roles:
                steps.append(ProfileStep(region, kind, name, roles is None, True))
    return tuple(steps)


def profile_differences(saved: Mapping[str, Sequence[str]],
                        now: Mapping[str, Sequence[str]]) -> list[str]:
    """The cluster's profiles that appeared, went, or changed roles since ``saved``."""
    out = [f"instance profile {n} appeared" for n in now if n not in saved]
    out += [f"instance profile {n} is gone" for n in saved if n not in now]
    out += [f"instance profile {n} held {list(saved[n])}, now {list(now[n])}"
            for n in saved if n in now and tuple(saved[n]) != tuple(now[n])]
    return out
