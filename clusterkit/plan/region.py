"""What `up` does to a region before it launches there: the key pair, and the stack
with every parameter it passes, for the plan's own region and for each region a
fallback candidate launches in (observed before the question, like the own one). PURE."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from clusterkit.kinds import StackAction
from clusterkit.plan.stack import Facts, stack_action, stack_parameters
from clusterkit.plan.world import EMPTY, StackSeen
from clusterkit.spec.model import Spec


@dataclass(frozen=True)
class RegionPlan:
    """Apply's work in one region before a launch there, exactly: import the key pair
    or not, the stack's action and parameters (the role's come from ``UpPlan.role``),
    the stack as observed, the VPC and its subnet per AZ."""

    region: str
    import_key: bool
    action: StackAction
    parameters: Mapping[str, str]
    current: StackSeen | None
    vpc_id: str
    subnets: Mapping[str, str] = field(default_factory=lambda: EMPTY)  # AZ -> subnet id

    def lines(self) -> list[str]:
        """What it does, as `plan` shows it (nothing when it changes nothing)."""
        out = [f"import your SSH public key as a key pair in {self.region}"] \
            if self.import_key else []
        if self.action != StackAction.NONE:
            params = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
            out.append(f"stack in {self.region}: {self.action}, parameters {params}")
        return out


def region_plan(spec: Spec, region: str, stack: StackSeen | None, facts: Facts,
                key_pair_missing: bool, subnets: Mapping[str, str]) -> RegionPlan:
    """The region's key pair and stack as the spec and what was observed there want."""
    current = dict(stack.parameters) if stack else None
    wanted = stack_parameters(spec, facts)
    action = stack_action(stack.status if stack else None, current, wanted)
    return RegionPlan(region, key_pair_missing, action, MappingProxyType(wanted), stack,
                      facts.vpc_id, MappingProxyType(dict(subnets)))
