"""What `up`'s apply made, as typed records crossing from ``cluster/`` to the bootstrap
(after SkyPilot's ClusterInfo): the stack (id, VPC, outputs), and the nodes it launched,
started and kept. PURE."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clusterkit.plan.nodes import Node, node_order

# the stack outputs that name the cluster's EFS (created, kept from an earlier `up`)
EFS_OUTPUTS = ("DeletedFileSystemId", "RetainedFileSystemId", "ExistingFileSystemId")


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

    @property
    def region(self) -> str:
        return self.stack.region

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every running node, master first."""
        return tuple(sorted((*self.kept, *self.started, *self.new), key=node_order))
