"""Reserved capacity as `plan` and `up` see it: the reservation read from EC2 (an
On-Demand Capacity Reservation or a Capacity Block for ML), the one offer it makes, why
`up` refuses it, and the lines `plan` shows about it. PURE: ``Reservation.read_at`` is
the clock, read by whoever read the reservation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from clusterkit.catalog.instances import lookup
from clusterkit.catalog.prices import on_demand_price
from clusterkit.catalog.ranking import Offer
from clusterkit.errors import SpecIssue
from clusterkit.kinds import Market, ReservationKind, ReservationState
from clusterkit.plan.nodes import Node
from clusterkit.spec.model import Spec

KEY = "nodes.capacity_reservation"
PLATFORM = "Linux/UNIX"  # clusterkit's images: a reservation for another never matches them
TENANCY = "default"  # the launch template's: a dedicated reservation never matches it
# AWS begins terminating a block's instances 30 minutes before its end, and says so in an
# EventBridge event 10 minutes earlier (EC2 User Guide, "Monitor Capacity Blocks").
TERMINATION_LEAD = 30 * 60
WARNING_LEAD = 40 * 60


# A block in these has not started: `up` waits for its start (or, --no-wait, exits).
BLOCK_WAITS = (ReservationState.SCHEDULED, ReservationState.PAYMENT_PENDING)


@dataclass(frozen=True)
class Reservation:
    """One capacity reservation as EC2 described it at ``read_at`` (epoch seconds);
    ``start``/``end`` epoch seconds (None: none, an ODCR without an end date)."""

    reservation_id: str
    region: str
    instance_type: str
    az: str
    az_id: str
    total: int
    available: int
    state: ReservationState
    kind: ReservationKind = ReservationKind.ODCR
    platform: str = PLATFORM
    tenancy: str = TENANCY
    start: float | None = None
    end: float | None = None
    read_at: float = 0.0

    @property
    def block(self) -> bool:
        return self.kind is ReservationKind.CAPACITY_BLOCK

    @property
    def waits(self) -> bool:
        """A block that has not started yet: `up` waits for ``start``."""
        return self.block and self.state in BLOCK_WAITS

    @property
    def label(self) -> str:
        what = "capacity block" if self.block else "On-Demand Capacity Reservation"
        return f"{what} {self.reservation_id}"

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, ReservationKind | ReservationState) else v
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reservation:
        values = dict(data)
        values["state"] = ReservationState(values["state"])
        values["kind"] = ReservationKind(values.get("kind", ReservationKind.ODCR.value))
        return cls(**values)


def utc(epoch: float | None) -> str:
    """``2026-01-02 11:30 UTC``; ``-`` for None."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def iso(epoch: float) -> str:
    """``2026-01-02T11:30:00Z``: the block end tag's form."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    """``3h 12m``, ``2d 4h``, ``45s``: a duration for a countdown."""
    left = max(0, int(seconds))
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def reservation_offer(reservation: Reservation) -> Offer:
    """The one place a launch into ``reservation`` goes: its type and AZ; an ODCR at the
    on-demand price (EC2 bills its instances so), a block at 0 $/h (paid upfront)."""
    r = reservation
    known = lookup(r.instance_type)
    od = on_demand_price(r.instance_type, r.region)
    market = Market.CAPACITY_BLOCK if r.block else Market.ON_DEMAND
    return Offer(r.instance_type, r.region, r.az, r.az_id or None, market,
                 0.0 if r.block else od, od, known.gpu_count if known else 0,
                 block_end=r.end if r.block else None)


def _issue(spec: Spec, message: str, hint: str) -> SpecIssue:
    loc = spec.where(KEY)
    return SpecIssue(loc.file, loc.line, loc.col, KEY, message, hint)


def _state_problem(r: Reservation) -> tuple[str, str] | None:
    """Why ``r`` cannot take instances now and will not by waiting, with a hint."""
    if r.waits:
        return None
    if r.state is not ReservationState.ACTIVE:
        later = r.state in (ReservationState.PENDING, ReservationState.ASSESSING,
                            ReservationState.SCHEDULED, ReservationState.DELAYED)
        return (f"it is {r.state}, not active",
                f"wait until it is active ({utc(r.start)})" if later
                else "name an active reservation (`aws ec2 describe-capacity-reservations`)")
    if r.block and r.end is not None and r.read_at >= r.end - TERMINATION_LEAD:
        return (f"it ends at {utc(r.end)} and AWS terminates its instances from "
                f"{utc(r.end - TERMINATION_LEAD)}", "buy another block (`clusterkit "
                "capacity-blocks`) or use on-demand")
    return None


def _fit_problem(spec: Spec, r: Reservation, launching: int,
                 nodes: Sequence[Node]) -> tuple[str, str] | None:
    """Why the spec's nodes do not fit ``r``: type, platform, tenancy, AZ, room."""
    types = spec.nodes.instance_types
    live = sorted({n.az for n in nodes if n.live and n.az})
    if r.instance_type not in types:
        return (f"it holds {r.instance_type}, the spec wants {', '.join(types)}",
                f"set nodes.instance_types: [{r.instance_type}], or name a reservation "
                f"for {types[0]}")
    if r.platform != PLATFORM or r.tenancy != TENANCY:
        return (f"it is for {r.platform} with {r.tenancy} tenancy; clusterkit launches "
                f"{PLATFORM} images with {TENANCY} tenancy", "name a Linux/UNIX "
                "reservation with default tenancy")
    if live and live != [r.az]:
        return (f"it is in {r.az}, the cluster's nodes run in {', '.join(live)}",
                "name a reservation in the nodes' AZ, or `clusterkit down` first")
    if r.available < launching:
        return (f"{r.available} of its {r.total} instance(s) are available, `up` launches "
                f"{launching}", "lower nodes.count, free instances of the reservation, or "
                "use a bigger one")
    return None


def refusal(spec: Spec, r: Reservation, launching: int,
            nodes: Sequence[Node] = ()) -> SpecIssue | None:
    """Why `up` refuses to launch ``launching`` nodes into ``r`` (located at the spec's
    nodes.capacity_reservation), or None. A block not started yet is no refusal."""
    block = spec.nodes.market == Market.CAPACITY_BLOCK
    if block != r.block:
        return _issue(spec, f"{r.label} ({r.instance_type} in {r.az}) does not fit "
                      f"nodes.market {spec.nodes.market}",
                      "remove market: capacity-block (an ODCR launches on-demand)" if block
                      else "set nodes.market: capacity-block")
    problem = _state_problem(r) or _fit_problem(spec, r, launching, nodes)
    if problem is None:
        return None
    return _issue(spec, f"{r.label} ({r.instance_type} in {r.region}/{r.az}) cannot take "
                  f"the nodes: {problem[0]}", problem[1])


def reservation_lines(r: Reservation) -> list[str]:
    """What `plan` says about the reservation: what it holds, when, and how it bills."""
    lines = [f"{r.label}: {r.total} x {r.instance_type} in {r.az} ({r.az_id}), "
             f"{r.available} of {r.total} available, {r.state}"]
    if r.block:
        starts = f"in {span(r.start - r.read_at)}" if r.start and r.start > r.read_at \
            else "started"
        lines.append(f"  starts {utc(r.start)} ({starts}), ends {utc(r.end)}; AWS "
                     f"terminates its instances from {utc((r.end or 0) - TERMINATION_LEAD)}"
                     ", the job gets its checkpoint signal before")
        lines.append("  paid upfront: its instances add no hourly charge (volumes still do)")
        if r.waits:
            lines.append("  `up` waits for its start (`up --no-wait` exits instead)")
    else:
        lines.append(f"  {'ends ' + utc(r.end) if r.end else 'no end date'}; its "
                     "instances bill at the on-demand price, and the reservation bills "
                     "for unused room too")
    return lines


def group_lines(spec: Spec) -> list[str]:
    """A resource group is not read: what EC2 does with it."""
    return [f"reservations of the group {spec.nodes.capacity_reservation}: not read "
            "(clusterkit reads a reservation by its cr- id); EC2 puts each node into a "
            "matching reservation of the group with room, else runs it as plain "
            "on-demand, at the same price"]


def launch_refusal(spec: Spec, reservation: Reservation | None, launch: Sequence[int],
                   nodes: Sequence[Node] = ()) -> SpecIssue | None:
    """``refusal`` of the plan's launch (none when nothing is launched or nothing read)."""
    if reservation is None or not launch:
        return None
    return refusal(spec, reservation, len(launch), nodes)


def held_lines(spec: Spec | None, reservation: Reservation | None,
               refused: SpecIssue | None) -> list[str]:
    """The reservation's lines in the plan, and `up`'s refusal with its hint."""
    lines: list[str] = []
    if reservation is not None:
        lines += reservation_lines(reservation)
    elif spec is not None and spec.nodes.capacity_reservation and not spec.nodes.reservation_id:
        lines += group_lines(spec)
    elif spec is not None and spec.nodes.reservation_id:
        lines.append(f"{spec.nodes.reservation_id}: not read (offline, or nothing to launch)")
    if refused is not None:
        lines.append(f"`up` refuses this: {refused.format()}")
    return lines
