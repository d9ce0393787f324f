"""Meaning checks of reserved capacity: ``nodes.capacity_reservation`` (an On-Demand
Capacity Reservation, or a resource group of them) and ``nodes.market: capacity-block``.
What the reservation itself holds (type, AZ, instances left, state) is read by `plan`
and `up` (plan.reservation); here only what the spec alone says. PURE."""

from __future__ import annotations

from collections.abc import Callable

from clusterkit.kinds import MarketPolicy
from clusterkit.spec.model import Spec

Add = Callable[..., None]
BUY_HINT = ("buy one with `clusterkit capacity-blocks --type TYPE --count N --duration 24h "
            "--buy ROW` (it prints the spec lines to use it)")


def group_region(arn: str) -> str:
    """The region of a resource group's ARN (its fourth field)."""
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 else ""


def check_reservation(spec: Spec, add: Add) -> None:
    """A block needs its reservation id and one instance type; an ODCR holds on-demand
    instances only, in its own region; a reservation decides every node's market, the
    master's too, and its price."""
    nodes = spec.nodes
    cr = nodes.capacity_reservation
    block = nodes.market == MarketPolicy.CAPACITY_BLOCK
    if block:
        _block(spec, add)
    if cr is None:
        return
    if not block and nodes.market != MarketPolicy.ON_DEMAND:
        add("nodes.market", f"market {nodes.market} with an On-Demand Capacity Reservation: "
            "spot instances never launch into a reservation", "set market: on-demand (or "
            "leave it out), or market: capacity-block for a Capacity Block")
    master = nodes.master.market
    if master is not None and (block or master != MarketPolicy.ON_DEMAND):
        add("nodes.master.market", f"the master {master} while every node launches into "
            f"{cr}: the reservation decides every node's market", "remove nodes.master")
    if not cr.startswith("cr-") and group_region(cr) != spec.region:
        add("nodes.capacity_reservation", f"the resource group is in {group_region(cr)}, the "
            f"cluster in {spec.region}: EC2 matches only reservations of the instance's "
            "region", f"set region: {group_region(cr)}, or name a group in {spec.region}")


def _block(spec: Spec, add: Add) -> None:
    nodes = spec.nodes
    cr = nodes.capacity_reservation
    if cr is None:
        add("nodes.market", "market capacity-block needs nodes.capacity_reservation: the "
            "block's reservation id (cr-…)", BUY_HINT)
    elif not cr.startswith("cr-"):
        add("nodes.capacity_reservation", "market capacity-block needs the block's own "
            "reservation id (cr-…), not a resource group", "name the block's cr- id "
            "(`aws ec2 describe-capacity-reservations` lists it)")
    if len(nodes.instance_types) > 1:
        add("nodes.instance_types", f"a Capacity Block holds one instance type; "
            f"{len(nodes.instance_types)} are listed", "keep only the block's type")
    if nodes.max_price is not None:
        add("nodes.max_price", "max_price is ignored: a Capacity Block is paid upfront",
            "remove max_price", "warning")
