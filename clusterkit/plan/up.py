"""What `up` would do, as data and as lines for the terminal. PURE."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from clusterkit.catalog.ranking import Offer
from clusterkit.plan.cost import hourly
from clusterkit.plan.drift import Difference, refused, spec_drift
from clusterkit.plan.nodes import Node, NodeActions, node_actions
from clusterkit.plan.observed import Observed
from clusterkit.plan.stack import (
    changed_parameters,
    stack_action,
    stack_contents,
    stack_parameters,
)
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

    def describe(self) -> str:
        price = f"${self.price:.4f}/h" if self.price is not None else "price unknown"
        return f"{self.instance_type} {self.market} in {self.az or self.region} ({price} per node)"


@dataclass(frozen=True)
class UpPlan:
    cluster: str
    region: str
    stack: str  # "create" | "recreate" | "update" | "none"
    stack_changes: tuple[str, ...]
    key_pair: str  # "import" | "none"
    nodes: NodeActions
    choice: Choice | None  # where missing nodes would be launched
    existing: tuple[Node, ...] = ()
    notes: tuple[str, ...] = field(default=())
    drift: tuple[Difference, ...] = ()  # the spec against the running cluster
    warnings: tuple[str, ...] = ()  # train.packages against the GPU of the chosen type
    stack_parts: tuple[str, ...] = ()  # what a created stack holds (plan.stack.stack_contents)
    candidates: tuple[Offer, ...] = ()  # where a launch may go, in order: `up` walks these only

    @property
    def mutates(self) -> bool:
        return self.stack != "none" or self.key_pair != "none" or not self.nodes.empty

    @property
    def asks(self) -> bool:
        """Changes that cost money or remove nodes, which `up` confirms first (writing
        missing node tags alone does not ask)."""
        return (self.stack != "none" or self.key_pair != "none"
                or not replace(self.nodes, retag=()).empty)

    @property
    def refused(self) -> list[Difference]:
        """Differences `up` cannot apply to running nodes (it refuses them)."""
        return refused(self.drift)

    def hourly_after(self) -> float | None:
        """Total $/h once `up` is done: kept nodes at their recorded price, new ones at
        the choice's."""
        kept = [n for n in self.existing if n.live and n.instance_id not in self.nodes.terminate]
        total = 0.0
        for node in kept:
            if node.price is None:
                return None
            total += node.price
        if self.nodes.launch:
            new = hourly(self.choice.price if self.choice else None, len(self.nodes.launch))
            if new is None:
                return None
            total += new
        return round(total, 4)

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster, "region": self.region, "stack": self.stack,
            "stack_changes": list(self.stack_changes), "key_pair": self.key_pair,
            "launch_indexes": list(self.nodes.launch),
            "terminate": list(self.nodes.terminate),
            "retag": list(self.nodes.retag_ids),
            "choice": None if self.choice is None else self.choice.__dict__,
            "hourly_usd": self.hourly_after(),
            "changes": self.mutates, "notes": list(self.notes),
            "warnings": list(self.warnings),
            "drift": [{"key": d.key, "running": d.running, "wanted": d.wanted,
                       "in_place": d.apply.name == "IN_PLACE"} for d in self.drift],
        }


def choice_of(candidates: Sequence[Offer]) -> Choice | None:
    """The first candidate, with the dearest one's price (the worst case `up` states)."""
    if not candidates:
        return None
    first = candidates[0]
    prices = [o.price for o in candidates if o.price is not None]
    return Choice(first.instance_type, first.region, first.az or first.az_id, first.market,
                  first.price, max(prices) if prices else None)


def plan_up(spec: Spec, observed: Observed, notes: Sequence[str] = ()) -> UpPlan:
    """What `up` does, from the spec and one observation of the world alone."""
    stack = observed.stack
    current = dict(stack.parameters) if stack else None
    wanted = stack_parameters(spec, observed.facts) if observed.facts else {}
    action = stack_action(stack.status if stack else None, current, wanted)
    changes = tuple(changed_parameters(current, wanted)) if action == "update" else ()
    nodes = observed.nodes
    return UpPlan(spec.name, observed.region, action, changes,
                  "import" if observed.key_pair_missing else "none",
                  node_actions(spec.name, spec.nodes.count, nodes),
                  choice_of(observed.candidates), tuple(nodes), tuple(notes),
                  tuple(spec_drift(spec, nodes)), stack_parts=stack_contents(spec),
                  candidates=observed.candidates)


def gpu_warnings(spec: Spec, plan: UpPlan) -> tuple[str, ...]:
    """validate's CUDA warnings for the type new nodes get (or, launching none, the
    types the live nodes run)."""
    if plan.nodes.launch and plan.choice is not None:
        types = [plan.choice.instance_type]
    else:
        types = sorted({n.instance_type for n in plan.existing if n.live})
    return tuple(w for t in types for w in cuda_warnings(spec, t))


def plan_lines(plan: UpPlan) -> list[str]:
    """Human-readable list of what `up` would do."""
    lines = [f"cluster {plan.cluster} in {plan.region}"]
    lines.extend(f"differs: {d.describe()}" for d in plan.drift)
    if plan.refused:
        lines.append(f"`up` refuses this: `clusterkit down {plan.cluster}` first, then `up`")
    stack = {"create": f"create stack ({', '.join(plan.stack_parts)})",
             "recreate": "delete the failed stack and create it again",
             "update": "update stack: " + "; ".join(plan.stack_changes),
             "none": "stack: up to date"}[plan.stack]
    lines.append(stack)
    if plan.key_pair == "import":
        lines.append("import your SSH public key as an EC2 key pair")
    if plan.nodes.launch:
        where = plan.choice.describe() if plan.choice else "no launch candidate"
        lines.append(f"launch {len(plan.nodes.launch)} node(s) (indexes "
                     f"{', '.join(map(str, plan.nodes.launch))}) in one call: {where}")
    lines.extend(f"  warning: {w}" for w in plan.warnings)
    if plan.nodes.terminate:
        lines.append(f"terminate {len(plan.nodes.terminate)} node(s): "
                     + ", ".join(plan.nodes.terminate))
    if plan.nodes.retag:
        lines.append(f"tag {len(plan.nodes.retag_ids)} node(s) with their role "
                     f"({len(plan.nodes.retag)} call(s))")
    if not plan.mutates:
        lines.append("nothing to change")
    total = plan.hourly_after()
    lines.append("total: " + (f"${total:.4f}/h" if total is not None else "$/h unknown"))
    lines.extend(f"note: {n}" for n in plan.notes)
    return lines
