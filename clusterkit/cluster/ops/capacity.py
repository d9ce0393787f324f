"""`clusterkit capacity-blocks`: the Capacity Block offerings for a type, count and
duration, cheapest first; with ``buy``, one of them bought after a question that states
its price, type, count, AZ and dates (``yes`` skips it; no terminal and no ``yes``:
refused, exit 2, as `up` does)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clusterkit.aws.reservations import block_offerings, purchase_block
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.plan.blocks import (
    BlockOffering,
    block_hours,
    block_type,
    cheapest_first,
    chosen,
    question,
    spec_lines,
    start_after,
)
from clusterkit.plan.reservation import Reservation

Confirm = Callable[[str], bool]


@dataclass(frozen=True)
class BlocksResult:
    """The offerings listed (cheapest first) and, after ``--buy``, what was bought."""

    region: str
    instance_type: str
    count: int
    hours: int
    offerings: tuple[BlockOffering, ...]
    bought: Reservation | None = None
    offering: BlockOffering | None = None  # the one bought
    spec_lines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"region": self.region, "instance_type": self.instance_type,
                "count": self.count, "hours": self.hours,
                "offerings": [o.to_json() for o in self.offerings],
                "bought": self.bought.to_json() if self.bought else None,
                "offering": self.offering.to_json() if self.offering else None,
                "spec_lines": list(self.spec_lines)}


def _confirmed(offering: BlockOffering, region: str, *, yes: bool,
               confirm: Confirm | None) -> None:
    """The purchase's question: declined is exit 1, no terminal without ``yes`` exit 2."""
    if yes:
        return
    if confirm is None:
        raise UsageError(f"buying {offering.offering_id} ({offering.price()}) needs a yes "
                         "and there is no terminal to ask on: nothing bought",
                         "pass --yes to buy without asking")
    if not confirm(question(offering, region)):
        raise ClusterkitError("declined: nothing bought", "run again with --buy to buy, "
                              "or without it to list the offerings")


def _region(rt: Runtime, region: str | None) -> str:
    found = region or getattr(rt.session, "region_name", None)
    if not found:
        raise UsageError("capacity-blocks needs a region", "pass --region R (or set "
                         "AWS_REGION): blocks are offered per region")
    return str(found)


def do_capacity_blocks(*, instance_type: str, count: int, duration: str,
                       after: str | None = None, buy: str | None = None,
                       region: str | None = None, profile: str | None = None,
                       yes: bool = False, confirm: Confirm | None = None,
                       rt: Runtime | None = None) -> BlocksResult:
    """List the offerings; with ``buy`` (a row number of the list, or an offering id)
    buy that one (PurchaseCapacityBlock) once confirmed. Usage errors (duration, date,
    row, an instance type AWS does not offer, a start in the past) exit 2 before any AWS
    call."""
    hours, unknown = block_hours(duration), block_type(instance_type)
    if count < 1:
        raise UsageError(f"--count {count}: at least one instance", "e.g. --count 2")
    rt = rt or Runtime.make(region=region, profile=profile)
    earliest = start_after(after, rt.wall())
    where = _region(rt, region)
    if unknown:
        rt.warn(unknown)
    listed = tuple(cheapest_first(block_offerings(
        rt.session, where, instance_type=instance_type, count=count, hours=hours,
        start_after=earliest)))
    result = BlocksResult(where, instance_type, count, hours, listed)
    if buy is None:
        return result
    offering = chosen(listed, buy)
    _confirmed(offering, where, yes=yes, confirm=confirm)
    bought = purchase_block(rt.session, where, offering.offering_id, rt.wall())
    return BlocksResult(where, instance_type, count, hours, listed, bought, offering,
                        tuple(spec_lines(bought.reservation_id, offering, where)))
