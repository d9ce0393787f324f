"""Cost arithmetic. PURE: the caller passes the clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from clusterkit.kinds import BILLED_STATES, InstanceState
from clusterkit.plan.nodes import Node


def hours_between(start_iso: str, now: datetime) -> float:
    """Hours from an ISO 8601 timestamp (with offset) to ``now`` (aware); 0 if unknown."""
    if not start_iso:
        return 0.0
    try:
        start = datetime.fromisoformat(start_iso.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (now - start).total_seconds() / 3600.0)


def node_cost(node: Node, now: datetime) -> float | None:
    """USD so far at the recorded $/h (EC2 bills per second; a minimum of 60 s)."""
    if node.price is None or node.state not in BILLED_STATES:
        return None
    hours = max(hours_between(node.launch_time, now), 60 / 3600)
    return round(node.price * hours, 4)


def cluster_hourly(nodes: Sequence[Node]) -> float | None:
    prices = [n.price for n in nodes if n.live and n.state != InstanceState.STOPPED]
    if any(p is None for p in prices):
        return None
    return round(sum(p for p in prices if p is not None), 4)


def hourly(price: float | None, count: int) -> float | None:
    return None if price is None else round(price * count, 4)


def hours_bought(dollars: float, per_hour: float | None) -> float | None:
    """Hours ``dollars`` last at ``per_hour`` (None: the price is unknown)."""
    if per_hour is None or per_hour <= 0:
        return None
    return dollars / per_hour


def worst_hourly(count: int, on_demand: Sequence[float | None],
                 max_price: float | None = None) -> float | None:
    """The most ``count`` nodes can bill per hour: the dearest allowed type's on-demand
    price (``on_demand``: one per allowed type and region), or ``max_price`` (spot's own
    ceiling) when that is dearer; None when no price is known."""
    known = [p for p in on_demand if p is not None]
    if max_price is not None:
        known.append(max_price)
    return round(max(known) * count, 4) if known else None


def usd(value: float) -> str:
    """Dollars to the cent, with two more digits below a dollar (a cap may be cents)."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def duration(hours: float) -> str:
    """``1.2 h``, ``12.5 min``, ``40 s``."""
    if hours >= 1:
        return f"{hours:,.1f} h"
    minutes = hours * 60
    return f"{minutes:.1f} min" if minutes >= 1 else f"{minutes * 60:.0f} s"
