"""What `up` read of the world, once, before it plans: one typed record the pure plan
is made from (``plan.up.plan_up``), so the plan the user confirms is a function of what
was observed and of the spec alone, and tests give it as data
(tests/unit/plan_up_cases/). PURE."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clusterkit.catalog.ranking import Offer
from clusterkit.plan.nodes import Node
from clusterkit.plan.stack import Facts


@dataclass(frozen=True)
class StackSeen:
    """The cluster's stack as DescribeStacks showed it."""

    status: str
    parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, described: Mapping[str, Any] | None) -> StackSeen | None:
        """From aws.stack.describe_stack's answer (None: there is no stack)."""
        return cls(described["status"], described["parameters"]) if described else None


@dataclass(frozen=True)
class Observed:
    """One read of the region `up` applies to.

    region: the nodes' region, or (a new cluster) the first candidate's; nodes: the
    cluster's instances found by tag; stack: None when there is none; facts: what the
    stack's parameters depend on besides the spec (VPC, AMI, key, SSH source, kept EFS);
    candidates: where missing nodes may be launched, in the order `up` tries them (the
    ranked search, or a scale-out's AZ and type), the first being the plan's choice."""

    region: str
    nodes: tuple[Node, ...]
    stack: StackSeen | None
    facts: Facts | None
    key_pair_missing: bool
    candidates: tuple[Offer, ...] = ()
