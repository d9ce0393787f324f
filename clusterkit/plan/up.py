"""What `up` would do, as data and as lines for the terminal. PURE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from clusterkit.bootstrap.steps import spec_steps
from clusterkit.catalog.ranking import Offer
from clusterkit.errors import SpecIssue
from clusterkit.kinds import KeyPairAction, StackAction
from clusterkit.plan.candidates import mixed_warnings, plan_candidates
from clusterkit.plan.cost import hourly
from clusterkit.plan.drift import Difference, refused, spec_drift
from clusterkit.plan.mounts import MountTarget
from clusterkit.plan.nodes import Node, NodeActions, node_actions
from clusterkit.plan.profiles import ProfileStep, plan_profiles
from clusterkit.plan.region import RegionPlan, region_plan
from clusterkit.plan.reservation import Reservation, launch_refusal
from clusterkit.plan.stack import (
    StackRole,
    changed_parameters,
    stack_action,
    stack_contents,
    stack_parameters,
)
from clusterkit.plan.wire import WIRE_OFF, from_plain, to_plain
from clusterkit.plan.world import Observed
from clusterkit.spec.checks import cuda_warnings
from clusterkit.spec.model import Spec


@dataclass(frozen=True)
class Choice:
    """Where new nodes go: one offer (type x AZ x market) and its $/h per node."""

    instance_type: str
    region: str
    az: str | None
    market: str
    price: float | None
    worst_price: float | None = None  # the dearest offer `up` may fall back to, per node
    on_demand_price: float | None = None  # of the same type and AZ (a master on-demand)

    def describe(self) -> str:
        price = f"${self.price:.4f}/h" if self.price is not None else "price unknown"
        return f"{self.instance_type} {self.market} in {self.az or self.region} ({price} per node)"


@dataclass(frozen=True)
class UpPlan:
    """Everything `up` does, decided before the question from the spec and one
    observation (``plan_up``): `plan` shows it, a saved plan keeps it (``to_wire``) and
    apply does exactly it (``plan.applycalls`` says its AWS writes)."""

    cluster: str
    region: str
    stack: StackAction
    stack_changes: tuple[str, ...]
    key_pair: KeyPairAction
    nodes: NodeActions
    choice: Choice | None  # where missing nodes would be launched
    existing: tuple[Node, ...] = ()
    notes: tuple[str, ...] = field(default=())
    drift: tuple[Difference, ...] = ()  # the spec against the running cluster
    warnings: tuple[str, ...] = ()  # train.packages against the GPU of the chosen type
    stack_parts: tuple[str, ...] = ()  # what a created stack holds (plan.stack.stack_contents)
    candidates: tuple[Offer, ...] = ()  # where a launch may go, in order: `up` walks these only
    parameters: Mapping[str, str] = field(default_factory=dict)  # the stack's, as wanted
    dataset_gib: int | None = None  # each dataset clone's size, from the snapshot's check
    reservation: Reservation | None = None  # nodes.capacity_reservation, as read
    refusal: SpecIssue | None = None  # why `up` refuses to launch into it (plan.reservation)
    # apply's whole work, as the plan shows it: the region preparations (its own region
    # first, then each fallback candidate's, observed before the question), the role the
    # stack calls run as, the subnets where the EFS has a mount target already, and the
    # bootstrap steps the spec calls for
    regions: tuple[RegionPlan, ...] = ()
    role: StackRole | None = None
    mount_targets: tuple[str, ...] = ()
    # the spec's own file system's mount targets (plan.mounts: the nodes' is lent), and
    # the security group it is lent to (the stack's; "" while the stack is to be made)
    lent_targets: tuple[MountTarget, ...] = ()
    security_group: str = ""
    steps: tuple[str, ...] = ()
    profiles: tuple[ProfileStep, ...] = ()  # the instance profiles made through IAM's API
    # what it plans for: not saved (a saved plan names the spec file and its digest)
    spec: Spec | None = field(default=None, compare=False, repr=False, metadata=WIRE_OFF)

    @property
    def mutates(self) -> bool:
        return (self.stack != "none" or self.key_pair != "none" or not self.nodes.empty
                or bool(self.profiles))

    @property
    def asks(self) -> bool:
        """Changes that cost money or remove nodes, which `up` confirms first (writing
        missing node tags alone does not ask)."""
        return (self.stack != "none" or self.key_pair != "none"
                or not replace(self.nodes, retag=()).empty)

    @property
    def kept(self) -> list[Node]:
        """The nodes found that `up` keeps (it terminates the others)."""
        return [n for n in self.existing
                if n.holds_index and n.instance_id not in self.nodes.terminate]

    def region_plan(self, region: str) -> RegionPlan | None:
        """Apply's work in ``region`` before a launch there (None: not planned)."""
        return next((r for r in self.regions if r.region == region), None)

    @property
    def refused(self) -> list[Difference]:
        """Differences `up` cannot apply to running nodes (it refuses them)."""
        return refused(self.drift)

    def hourly_after(self) -> float | None:
        """Total $/h once `up` is done: kept nodes at their recorded price, new ones at
        the choice's."""
        total = 0.0
        for node in self.kept:
            if node.price is None:
                return None
            total += node.price
        if self.nodes.launch:
            new = launch_hourly(self.spec, self.choice, self.nodes.launch)
            if new is None:
                return None
            total += new
        return round(total, 4)

    def to_wire(self) -> dict[str, Any]:
        """The whole plan as JSON values, read back by ``from_wire`` (a saved plan)."""
        return to_plain(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], spec: Spec) -> UpPlan:
        """The plan ``to_wire`` wrote, for ``spec`` (WireError when it is not one)."""
        return replace(from_plain(cls, data), spec=spec)

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster, "region": self.region, "stack": self.stack,
            "stack_changes": list(self.stack_changes), "key_pair": self.key_pair,
            "launch_indexes": list(self.nodes.launch),
            "terminate": list(self.nodes.terminate),
            "retag": list(self.nodes.retag_ids),
            "nodes": {k: str(v) for k, v in self.nodes.by_node(self.existing).items()},
            "choice": None if self.choice is None else self.choice.__dict__,
            "candidates": [{"instance_type": o.instance_type, "region": o.region,
                            "az": o.az or o.az_id, "market": str(o.market), "price": o.price}
                           for o in self.candidates],
            "hourly_usd": self.hourly_after(),
            "changes": self.mutates, "notes": list(self.notes),
            "warnings": list(self.warnings),
            "reservation": self.reservation.to_json() if self.reservation else None,
            "refusal": self.refusal.format() if self.refusal else None,
            "drift": [{"key": d.key, "running": d.running, "wanted": d.wanted,
                       "in_place": d.apply.name == "IN_PLACE"} for d in self.drift],
        }


def launch_hourly(spec: Spec | None, choice: Choice | None, slots: Sequence[int],
                  each: float | None = None) -> float | None:
    """$/h of the nodes launched in ``slots`` at ``choice`` (``each``: another price per
    node, the worst case), the master at its own market's price when
    ``nodes.master.market`` sets it apart (on-demand: the choice's on-demand price)."""
    price = choice.price if each is None and choice else each
    if choice is None or price is None:
        return None
    apart = spec.nodes.master_apart(choice.market) if spec is not None and 0 in slots \
        else None
    if not apart:
        return hourly(price, len(slots))
    master = choice.on_demand_price if apart == "on-demand" else None
    if master is None:
        return None
    return round(price * (len(slots) - 1) + master, 4)


def choice_of(candidates: Sequence[Offer]) -> Choice | None:
    """The first candidate, with the dearest one's price (the worst case `up` states)."""
    if not candidates:
        return None
    first = candidates[0]
    prices = [o.price for o in candidates if o.price is not None]
    return Choice(first.instance_type, first.region, first.az or first.az_id, first.market,
                  first.price, max(prices) if prices else None, first.on_demand_price)


def plan_up(spec: Spec, observed: Observed, notes: Sequence[str] = ()) -> UpPlan:
    """What `up` does, from the spec and one observation of the world alone. The stack
    parameters it wants and the launch candidates (ranked from the observed offers) are
    part of the plan: applying it decides nothing again."""
    stack = observed.stack
    current = dict(stack.parameters) if stack else None
    wanted = stack_parameters(spec, observed.facts) if observed.facts else {}
    action = stack_action(stack.status if stack else None, current, wanted)
    changes = tuple(changed_parameters(current, wanted)) if action == StackAction.UPDATE else ()
    nodes = observed.nodes
    actions = node_actions(spec.name, spec.nodes.count, nodes)
    candidates = plan_candidates(spec, observed) if actions.launch else ()
    dataset = observed.dataset
    image = (observed.facts.image_note,) if observed.facts and observed.facts.image_note \
        else ()
    plan = UpPlan(spec.name, observed.region, action, changes,
                  KeyPairAction.IMPORT if observed.key_pair_missing else KeyPairAction.NONE,
                  actions,
                  choice_of(candidates), tuple(nodes), (*observed.notes, *notes, *image),
                  tuple(spec_drift(spec, nodes)), stack_parts=stack_contents(spec),
                  candidates=candidates, parameters=MappingProxyType(wanted),
                  dataset_gib=dataset.size_gib if dataset else None, spec=spec,
                  reservation=observed.reservation)
    plan = replace(plan, regions=_regions(spec, observed, plan), role=observed.role,
                   mount_targets=observed.mount_targets, steps=spec_steps(spec),
                   lent_targets=observed.lent_targets,
                   security_group=_kept_group(observed, action))
    if observed.profiles is not None:
        plan = replace(plan, profiles=plan_profiles(spec, [r.region for r in plan.regions],
                                                    observed.profiles))
    mixed = mixed_warnings(spec, observed.offers) if actions.launch else ()
    return replace(plan, warnings=(*(dataset.warnings if dataset else ()),
                                   *gpu_warnings(spec, plan), *mixed),
                   refusal=launch_refusal(spec, observed.reservation, actions.launch, nodes))


def _regions(spec: Spec, observed: Observed, plan: UpPlan) -> tuple[RegionPlan, ...]:
    """The own region's preparation as the plan says it, then each other region the
    candidates reach, in their order, as observed there."""
    if observed.facts is None:
        return ()
    own = RegionPlan(plan.region, plan.key_pair == KeyPairAction.IMPORT, plan.stack,
                     plan.parameters, observed.stack, observed.facts.vpc_id,
                     observed.subnets)
    others = [region_plan(spec, seen.region, seen.stack, seen.facts, seen.key_pair_missing,
                          seen.subnets)
              for seen in observed.elsewhere if seen.region != plan.region]
    return (own, *others)


def gpu_warnings(spec: Spec, plan: UpPlan) -> tuple[str, ...]:
    """validate's CUDA warnings for the type new nodes get (or, launching none, the
    types the live nodes run)."""
    if plan.nodes.launch and plan.choice is not None:
        types = [plan.choice.instance_type]
    else:
        types = sorted({n.instance_type for n in plan.existing if n.live})
    return tuple(w for t in types for w in cuda_warnings(spec, t))


def _kept_group(observed: Observed, action: StackAction) -> str:
    """The stack's security group when apply keeps it (none made or remade)."""
    if observed.stack is None or action in (StackAction.CREATE, StackAction.RECREATE):
        return ""
    return observed.stack.outputs.get("SecurityGroupId", "")
