"""Capacity Blocks for ML as `clusterkit capacity-blocks` shows and buys them: the
offerings (cheapest first), the question asked before a purchase, and the spec lines
that use a bought block. PURE."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from clusterkit.catalog import families, instances
from clusterkit.errors import UsageError
from clusterkit.node.autostop_policy import duration_seconds
from clusterkit.plan.reservation import utc
from clusterkit.spec.keys import INSTANCE_TYPE_RE

# On every block `capacity-blocks --buy` buys, from its purchase (TagSpecifications; the
# user's policy allows PurchaseCapacityBlock only with it): the offering bought.
BLOCK_TAG = "clusterkit:capacity-block"
HOUR = 3600
DAY_HOURS = 24
# AWS sells blocks of 1 to 14 days, and up to 182 days in 7-day steps: longer is refused
# here before any call (AWS checks the steps itself).
MOST_HOURS = 182 * DAY_HOURS
LIST_HINT = "e.g. --duration 24h, 48h, 7d (whole days: AWS sells blocks by the day)"
DATE_HINT = "e.g. 2026-03-01 or 2026-03-01T11:30 (UTC)"


@dataclass(frozen=True)
class BlockOffering:
    """One offering of DescribeCapacityBlockOfferings; ``start``/``end`` epoch seconds,
    ``fee`` the upfront price for the whole block (None: AWS gave none)."""

    offering_id: str
    instance_type: str
    az: str
    count: int
    start: float
    end: float
    hours: int
    fee: float | None
    currency: str = "USD"

    def price(self) -> str:
        return "price unknown" if self.fee is None else f"{self.fee:,.2f} {self.currency}"

    def describe(self) -> str:
        return (f"{self.count} x {self.instance_type} in {self.az}, {utc(self.start)} to "
                f"{utc(self.end)} ({self.hours} h), {self.price()} upfront")

    def to_json(self) -> dict[str, object]:
        return {"offering_id": self.offering_id, "instance_type": self.instance_type,
                "az": self.az, "count": self.count, "start": utc(self.start),
                "end": utc(self.end), "hours": self.hours, "upfront_fee": self.fee,
                "currency": self.currency}


def block_hours(text: str) -> int:
    """``--duration`` (24h, 2d, 48h) in whole hours; UsageError (exit 2) otherwise."""
    try:
        seconds = duration_seconds(text)
    except ValueError:
        raise UsageError(f"--duration {text!r} is not a duration", LIST_HINT) from None
    if seconds % HOUR or not 0 < seconds <= MOST_HOURS * HOUR:
        raise UsageError(f"--duration {text}: a block lasts whole hours, at most 182 days",
                         LIST_HINT)
    return seconds // HOUR


def start_after(text: str | None, now: float) -> datetime | None:
    """``--start-after`` (2026-03-01, or with a time, UTC unless it says otherwise), not
    before ``now`` (epoch seconds): a date alone may be today's (from ``now`` on), a
    time may not have passed; UsageError (exit 2) otherwise."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--start-after {text!r} is not a date", DATE_HINT) from None
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    current = datetime.fromtimestamp(now, timezone.utc)
    dated = len(text) == len("2026-03-01")
    if (when.date() if dated else when) < (current.date() if dated else current):
        raise UsageError(f"--start-after {text} is in the past (it is {utc(now)} now)",
                         f"a date from today on; {DATE_HINT}")
    return max(when, current) if dated else when


def block_type(name: str) -> str | None:
    """``--type`` checked as `validate` checks nodes.instance_types: UsageError (exit 2)
    naming the option and the closest known types for a name of no instance type's form
    or a size AWS does not offer of a family the catalog lists whole; a warning (returned)
    for any other type the catalog lacks (AWS adds types); None for a known type."""
    offered = families.not_offered(name)
    if offered:
        family = name.partition(".")[0]
        raise UsageError(f"--type {name}: not an instance type AWS offers (the {family} "
                         f"family comes in {', '.join(families.COMPLETE_FAMILIES[family])})",
                         f"did you mean {' or '.join(offered)}?")
    close = families.close_matches(name, 1)
    maybe = f"did you mean {close[0]}?" if close else "e.g. --type p5.48xlarge"
    if not re.match(INSTANCE_TYPE_RE, name):
        raise UsageError(f"--type {name!r}: not an EC2 instance type (family.size)", maybe)
    if instances.lookup(name) is None:
        return f"--type {name} is not in clusterkit's instance catalog ({maybe})"
    return None


def cheapest_first(offerings: Sequence[BlockOffering]) -> list[BlockOffering]:
    """By upfront price (unknown last), then start, then AZ."""
    return sorted(offerings, key=lambda o: (o.fee is None, o.fee or 0.0, o.start, o.az))


def chosen(offerings: Sequence[BlockOffering], buy: str) -> BlockOffering:
    """``--buy``: a row number of the list (1 = cheapest) or an offering id."""
    if buy.isdigit():
        row = int(buy)
        if 1 <= row <= len(offerings):
            return offerings[row - 1]
        raise UsageError(f"--buy {buy}: the list has {len(offerings)} row(s)",
                         "run without --buy to see them, then --buy ROW")
    found = [o for o in offerings if o.offering_id == buy]
    if not found:
        raise UsageError(f"--buy {buy}: no such offering for these options (offerings "
                         "change; the same --type, --count, --duration and --start-after "
                         "must list it)", "run without --buy to see what is offered now")
    return found[0]


def question(offering: BlockOffering, region: str) -> str:
    """What the user confirms before the purchase: price, type, count, AZ, dates."""
    return (f"buy capacity block {offering.offering_id}: {offering.describe()} in {region}? "
            "It is paid now and cannot be cancelled")


def spec_lines(reservation_id: str, offering: BlockOffering, region: str) -> list[str]:
    """The cluster.yaml lines that launch into the bought block."""
    return [f"region: {region}", "nodes:", f"  count: {offering.count}",
            f"  instance_types: [{offering.instance_type}]", "  market: capacity-block",
            f"  capacity_reservation: {reservation_id}"]
