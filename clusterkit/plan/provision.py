"""What `up`'s apply made, as typed records crossing from ``cluster/`` to the bootstrap
(after SkyPilot's ClusterInfo): the stack (id, VPC, outputs), and the nodes it launched,
started and kept. PURE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clusterkit.plan.nodes import Node, node_order
from clusterkit.plan.profiles import ProfileStep

# the stack outputs that name the cluster's EFS (created, kept from an earlier `up`)
EFS_OUTPUTS = ("DeletedFileSystemId", "RetainedFileSystemId", "ExistingFileSystemId")
# The stack's resources a launch needs, each with the output it stands for. The launch
# template names neither the instance profile (made outside the stack through IAM's
# API, plan.profiles) nor anything else slow, so the nodes boot meanwhile and get the
# profile once they run; the file system is for the mount target the launch makes in
# its AZ.
LAUNCH_RESOURCES = {"NodeLaunchTemplate": "LaunchTemplateId",
                    "NodeSecurityGroup": "SecurityGroupId",
                    "ClusterPlacementGroup": "PlacementGroupName",
                    "EfsDeleted": "DeletedFileSystemId", "EfsRetained": "RetainedFileSystemId"}
PROFILE_OUTPUT = "InstanceProfileArn"
CONTROLLER_PROFILE_OUTPUT = "ControllerProfileArn"


def launch_needs(parameters: Mapping[str, str]) -> tuple[str, ...]:
    """The logical ids of LAUNCH_RESOURCES a stack of ``parameters`` creates."""
    needs = ["NodeLaunchTemplate", "NodeSecurityGroup"]
    if parameters.get("UsePlacementGroup") == "true":
        needs.append("ClusterPlacementGroup")
    if parameters.get("CreateEfs") == "true":
        needs.append("EfsRetained" if parameters.get("EfsDeletionPolicy") == "retain"
                     else "EfsDeleted")
    return tuple(needs)


def launch_outputs(parameters: Mapping[str, str],
                   events: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """The outputs a launch needs, read from the events of a stack still being created
    (``aws.stack.stack_events``); None until each resource it needs is CREATE_COMPLETE."""
    done = {e["resource"]: e.get("physical", "") for e in events
            if e["status"] == "CREATE_COMPLETE"}
    needs = launch_needs(parameters)
    if not all(done.get(name) for name in needs):
        return None
    outputs = {LAUNCH_RESOURCES[name]: done[name] for name in needs}
    if parameters.get("ExistingFileSystemId"):
        outputs["ExistingFileSystemId"] = parameters["ExistingFileSystemId"]
    return outputs


@dataclass(frozen=True)
class StackRecord:
    """The cluster's stack once it is as the plan wants it."""

    region: str
    stack_id: str = ""
    vpc_id: str = ""
    outputs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, region: str, described: Mapping[str, Any] | None,
           vpc_id: str = "") -> StackRecord:
        """From aws.stack's plain record (None: no stack, no outputs)."""
        described = described or {}
        return cls(region, described.get("id", ""), vpc_id,
                   MappingProxyType(dict(described.get("outputs", {}))))

    @property
    def launch_template_id(self) -> str:
        return self.outputs["LaunchTemplateId"]

    @property
    def placement_group(self) -> str:
        return self.outputs.get("PlacementGroupName", "")

    @property
    def security_group(self) -> str:
        return self.outputs.get("SecurityGroupId", "")

    @property
    def instance_profile(self) -> str:
        """The nodes' instance profile (ARN): empty until the stack is complete."""
        return self.outputs.get(PROFILE_OUTPUT, "")

    @property
    def controller_profile(self) -> str:
        """The recovery controller's instance profile (ARN) for the master: empty until
        the stack is complete, and for a stack an older clusterkit made."""
        return self.outputs.get(CONTROLLER_PROFILE_OUTPUT, "")

    @property
    def efs_id(self) -> str | None:
        """The file system the nodes mount (created, kept from an earlier `up`, or given)."""
        return next((self.outputs[k] for k in EFS_OUTPUTS if self.outputs.get(k)), None)


@dataclass(frozen=True)
class ProvisionRecord:
    """The cluster after apply: every node running, in the stack's region."""

    stack: StackRecord
    new: tuple[Node, ...] = ()  # launched by this `up`
    started: tuple[Node, ...] = ()  # were stopped, started by this `up`
    kept: tuple[Node, ...] = ()  # ran before and were kept
    efs_subnet: str | None = None  # the EFS mount target made there, maybe not ready yet
    profiles: tuple[ProfileStep, ...] = ()  # the plan's instance profiles, given roles last

    @property
    def region(self) -> str:
        return self.stack.region

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every running node, master first."""
        return tuple(sorted((*self.kept, *self.started, *self.new), key=node_order))
