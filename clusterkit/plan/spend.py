"""What `up` is about to spend, as lines the user confirms. PURE.

Storage is priced at AWS's us-east-1 list prices per GB-month (EBS gp3 $0.08, EFS
Standard $0.30), storage only: gp3 IOPS/throughput above the baseline, EFS access
charges and data transfer are not included, and other regions differ a little.
A month is 730 hours.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterkit.catalog.prices import on_demand_price
from clusterkit.kinds import KeyPairAction, Market, MarketPolicy, StackAction
from clusterkit.plan.applied import apply_lines
from clusterkit.plan.cost import duration, hours_bought, usd, worst_hourly
from clusterkit.plan.dataset import dataset_cost
from clusterkit.plan.network import efa_lines
from clusterkit.plan.nodes import node_name
from clusterkit.plan.reservation import held_lines
from clusterkit.plan.stack import stack_contents
from clusterkit.plan.up import UpPlan, launch_hourly
from clusterkit.spec.model import Spec

HOURS_PER_MONTH = 730
EBS_GB_MONTH = {"gp3": 0.08, "gp2": 0.10, "io1": 0.125, "io2": 0.125, "st1": 0.045,
                "sc1": 0.015}
EFS_GB_MONTH = 0.30
ASSUMPTION = ("storage at us-east-1 list prices per GB-month (EBS gp3 $0.08, EFS $0.30), "
              "storage only; 730 h a month")


@dataclass(frozen=True)
class Spend:
    """The $/h `up` starts paying: nodes (now, and the worst case of its fallback) and
    the root volumes of the nodes it launches."""

    nodes_now: float | None
    nodes_worst: float | None
    volumes: float
    lines: tuple[str, ...]


def _money(value: float | None, unit: str = "/h") -> str:
    return "price unknown" if value is None else f"${value:.4f}{unit}"


def _node_lines(plan: UpPlan, spec: Spec) -> tuple[list[str], float | None, float | None]:
    launch = len(plan.nodes.launch)
    choice = plan.choice
    if not launch:
        return [], 0.0, 0.0
    if choice is None:
        return [f"launch {launch} node(s): no launch candidate"], None, None
    slots = plan.nodes.launch
    now = launch_hourly(spec, choice, slots)
    apart = spec.nodes.master_apart(choice.market) if 0 in slots else None
    master = _money(choice.on_demand_price if apart == "on-demand" else None)
    each = f"{_money(choice.price)} each" + (
        f", the master {apart} at {master} (nodes.master.market)" if apart else "")
    lines = [f"launch {launch} node(s) (indexes {', '.join(map(str, slots))}): "
             f"{choice.instance_type}, {choice.market}, in {choice.az or choice.region}, "
             f"{each} now = {_money(now)}"]
    worst_each = choice.worst_price
    worst = now
    if worst_each is not None and (choice.price is None or worst_each > choice.price):
        worst = launch_hourly(spec, choice, slots, worst_each)
        why = ("spot-then-on-demand: if spot has no capacity `up` falls back to on-demand"
               if spec.nodes.market == MarketPolicy.SPOT_THEN_ON_DEMAND
               else "if this offer has no capacity `up` tries the next one")
        lines.append(f"  worst case {_money(worst)} ({why}; the dearest candidate "
                     f"{_money(worst_each)} each)")
    if choice.market == Market.SPOT:
        lines.append("  spot: the price moves with the market and AWS may reclaim nodes")
    lines += [f"  warning: {w}" for w in plan.warnings]  # beside the type they are about
    lines += efa_lines(spec, choice.instance_type, slots)
    return lines, now, worst


def _storage_lines(plan: UpPlan, spec: Spec,
                   dataset_gib: int | None = None) -> tuple[list[str], float]:
    lines: list[str] = []
    launch = len(plan.nodes.launch)
    root = spec.nodes.root_volume
    per_gb = EBS_GB_MONTH.get(root.type)
    hourly = 0.0
    if launch:
        month = None if per_gb is None else round(per_gb * root.size_gb * launch, 2)
        hourly = 0.0 if month is None else round(month / HOURS_PER_MONTH, 4)
        lines.append(f"root volumes: {launch} x {root.size_gb} GB {root.type} = "
                     f"{_money(month, '/month')} ({_money(hourly)})")
    efs = spec.storage.efs
    if efs is not None and efs.create and plan.stack in (StackAction.CREATE, StackAction.RECREATE):
        lines.append(f"EFS file system ({efs.deletion_policy} on down): "
                     f"${EFS_GB_MONTH:.2f}/GB-month of data stored, empty at creation")
    data = spec.storage.dataset
    if data is not None and data.snapshot and launch:
        cost = dataset_cost(data, launch, dataset_gib or data.size_gb, EBS_GB_MONTH)
        lines += [f"{line} (clones of {data.snapshot}, made with the nodes)" if i == 0
                  else line for i, line in enumerate(cost.lines(data, HOURS_PER_MONTH))]
        if cost.per_month is not None:
            hourly = round(hourly + cost.per_month / HOURS_PER_MONTH, 4)
    return lines, hourly


def _named(plan: UpPlan, instance_id: str) -> str:
    """``t-worker-3 (i-…)``, or the bare id of a node without an index."""
    node = next((n for n in plan.existing if n.instance_id == instance_id), None)
    if node is None or node.index is None:
        return instance_id
    return f"{node_name(plan.cluster, node.index)} ({instance_id})"


def spend(plan: UpPlan, spec: Spec, dataset_gib: int | None = None) -> Spend:
    """The lines `up` shows before it asks, and the $/h they add up to (``dataset_gib``:
    the size of each dataset clone, when the snapshot was looked up)."""
    node_lines, now, worst = _node_lines(plan, spec)
    storage_lines, volumes = _storage_lines(plan, spec, dataset_gib)
    lines = [f"cluster {plan.cluster} in {plan.region}: up will"]
    if plan.stack in (StackAction.CREATE, StackAction.RECREATE):
        lines.append(f"create the stack ({', '.join(stack_contents(spec))})")
    elif plan.stack == StackAction.UPDATE:
        lines.append("update the stack: " + "; ".join(plan.stack_changes))
    if plan.key_pair == KeyPairAction.IMPORT:
        lines.append("import your SSH public key as an EC2 key pair")
    lines += node_lines + storage_lines
    if plan.nodes.start:
        started = [n for n in plan.existing if n.instance_id in plan.nodes.start]
        prices = [n.price for n in started]
        each = _money(None if None in prices else round(sum(p or 0.0 for p in prices), 4))
        lines.append(f"start {len(plan.nodes.start)} stopped node(s), {each} in all: "
                     + ", ".join(_named(plan, iid) for iid in plan.nodes.start))
    if plan.nodes.terminate:
        lines.append(f"terminate {len(plan.nodes.terminate)} node(s): "
                     + ", ".join(_named(plan, iid) for iid in plan.nodes.terminate))
    total_now = None if now is None else round(now + volumes, 4)
    after = plan.hourly_after()
    lines.append(f"new spending: {_money(total_now)} now"
                 + (f", at worst {_money(round(worst + volumes, 4))}"
                    if worst is not None and worst != now else "")
                 + (f"; the whole cluster then costs {_money(after)} for its nodes"
                    if plan.existing else ""))
    lines.append(f"({ASSUMPTION})")
    return Spend(now, worst, volumes, tuple(lines))


def plan_lines(plan: UpPlan) -> list[str]:
    """What `plan` prints and `up` shows before it asks, line for line: the one renderer
    of a plan (the spend lines above, the drift, warnings and notes)."""
    assert plan.spec is not None, "a plan made by plan_up"
    body = list(spend(plan, plan.spec, plan.dataset_gib).lines) if plan.mutates else [
        f"cluster {plan.cluster} in {plan.region}: nothing to change"]
    lines = [body[0], *(f"differs: {d.describe()}" for d in plan.drift)]
    if plan.refused:
        lines.append(f"`up` refuses this: `clusterkit down {plan.cluster}` first, then `up`")
    lines += held_lines(plan.spec, plan.reservation, plan.refusal)
    lines += body[1:]
    if plan.nodes.retag:
        lines.append(f"tag {len(plan.nodes.retag_ids)} node(s) with their role "
                     f"({len(plan.nodes.retag)} call(s))")
    lines += apply_lines(plan)
    lines += cap_lines(plan.spec)
    if not plan.mutates:
        total = plan.hourly_after()
        lines.append("the cluster's nodes cost " + (f"${total:.4f}/h" if total is not None
                                                    else "an unknown $/h"))
    if not plan.nodes.launch:  # else the spend lines show them under the launch
        lines += [f"warning: {w}" for w in plan.warnings]
    return lines + [f"note: {n}" for n in plan.notes]


def cap_lines(spec: Spec) -> list[str]:
    """What ``train.max_cost`` buys, in hours at the worst case: every node at the
    dearest allowed type's on-demand price in the allowed regions (or nodes.max_price,
    when dearer): the most a job can bill per hour, whatever `up` or a recovery
    launches (``training/budget.py``)."""
    cap = spec.train.max_cost if spec.train is not None else None
    if cap is None:
        return []
    nodes = spec.nodes
    prices = [on_demand_price(t, r) for t in nodes.instance_types for r in spec.regions]
    worst = worst_hourly(nodes.count, prices, nodes.max_price)
    return [cap_line(cap, worst, f"{nodes.count} x the dearest allowed type on-demand"
                     + (" or nodes.max_price" if nodes.max_price is not None else ""))]


def cap_line(cap: float, worst: float | None, what: str) -> str:
    """``train.max_cost $5.00 buys 1.2 h of the job at the worst case $4.0800/h (…)``."""
    hours = hours_bought(cap, worst)
    if hours is None:
        return (f"train.max_cost {usd(cap)}: the hours it buys are unknown (no price for "
                f"{what}); `train` refuses a cap it cannot count")
    return (f"train.max_cost {usd(cap)} buys {duration(hours)} of the job at the worst "
            f"case ${worst:.4f}/h ({what})")
