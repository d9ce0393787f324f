"""Capacity reservations in the emulator: moto implements no capacity-reservation or
Capacity Block API, so the calls clusterkit makes are answered here, in AWS's response
shapes (moto serializes a result with botocore's model), from state kept on moto's EC2
backend of the account and region (reset with it).

- CreateCapacityReservation / CancelCapacityReservation: an On-Demand Capacity
  Reservation, made and cancelled as on EC2 (what tests and the sandbox set up with).
- DescribeCapacityReservations: by id; unknown ids are refused with EC2's NotFound.
  The state follows the clock: a block is ``scheduled`` before its start, ``active``
  until its end, then ``expired``. AvailableInstanceCount is the total less the
  instances launched into it that are not terminated.
- DescribeCapacityBlockOfferings: two offerings for a type AWS sells blocks of, one per
  AZ of the first two, the first starting at StartDateRange (or now: the emulator has no
  11:30 UTC rule), the second a day later and cheaper; the fee is 90 % of the type's
  on-demand price (clusterkit's shipped snapshot) per instance-hour.
- PurchaseCapacityBlock: the offering (as listed) becomes a block reservation.
- RunInstances with CapacityReservationSpecification: the reservation must exist, be
  active, match the type and AZ and have room; a block needs InstanceMarketOptions
  capacity-block (and that market needs a block), else EC2's errors. Instances launched
  into one carry its id (CapacityReservationId) and, in a block, the lifecycle
  ``capacity-block``. A resource group target is not emulated: as on EC2 when the group
  has no matching reservation with room, the instances run as plain on-demand.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

STATE_ATTR = "_clusterkit_capacity"
DAY = timedelta(days=1)
FEE_FACTOR = 0.9  # a block's fee per instance-hour against the on-demand price
FALLBACK_RATE = 10.0  # $/instance-hour for a type the price snapshot lacks
# The families AWS sells Capacity Blocks of (EC2 User Guide, "Capacity Blocks for ML").
BLOCK_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1", "trn2")
NO_ROOM = "ReservationCapacityExceeded"
NO_ROOM_TEXT = ("The requested reservation does not have sufficient compatible and "
                "available capacity for this request.")


@dataclass
class Held:
    """One reservation the emulator holds."""

    reservation_id: str
    instance_type: str
    az: str
    az_id: str
    total: int
    start: datetime
    end: datetime | None = None
    block: bool = False
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    cancelled: bool = False
    tags: dict[str, str] = field(default_factory=dict)

    def state(self, now: datetime) -> str:
        if self.cancelled:
            return "cancelled"
        if self.end is not None and now >= self.end:
            return "expired"
        return "scheduled" if self.block and now < self.start else "active"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _when(value: Any) -> datetime | None:
    """A timestamp parameter (moto hands them over as text or datetime) in UTC."""
    if value in (None, ""):
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(
        str(value).replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _state(response: Any) -> dict[str, dict[str, Any]]:
    backend = response.ec2_backend
    if not hasattr(backend, STATE_ATTR):
        setattr(backend, STATE_ATTR, {"reservations": {}, "offerings": {}})
    return getattr(backend, STATE_ATTR)


def _error(code: str, message: str) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


def _zone(response: Any, name: str | None) -> tuple[str, str]:
    zones = {z.name: z.zone_id for z in response.ec2_backend.describe_availability_zones()}
    if name not in zones:
        raise _error("InvalidParameterValue", f"Invalid availability zone: [{name}]")
    return name, zones[name]


def _new_id(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:17]


def _used(response: Any, reservation_id: str) -> int:
    return sum(1 for i in response.ec2_backend.all_instances()
               if getattr(i, "capacity_reservation_id", None) == reservation_id
               and i.state != "terminated")


def _shape(response: Any, held: Held) -> dict[str, Any]:
    """A CapacityReservation as DescribeCapacityReservations answers it."""
    account, region = response.current_account, response.region
    out: dict[str, Any] = {
        "CapacityReservationId": held.reservation_id, "OwnerId": account,
        "CapacityReservationArn": f"arn:aws:ec2:{region}:{account}:capacity-reservation/"
                                  f"{held.reservation_id}",
        "AvailabilityZoneId": held.az_id, "InstanceType": held.instance_type,
        "InstancePlatform": held.platform, "AvailabilityZone": held.az,
        "Tenancy": held.tenancy, "TotalInstanceCount": held.total,
        "AvailableInstanceCount": max(0, held.total - _used(response, held.reservation_id)),
        "EbsOptimized": False, "EphemeralStorage": False, "State": held.state(_now()),
        "StartDate": held.start, "EndDateType": "limited" if held.end else "unlimited",
        "InstanceMatchCriteria": "targeted" if held.block else "open",
        "CreateDate": held.start, "ReservationType": "capacity-block" if held.block
        else "default", "Tags": [{"Key": k, "Value": v} for k, v in held.tags.items()]}
    if held.end is not None:
        out["EndDate"] = held.end
    return out


def _held(response: Any, reservation_id: str | None) -> Held:
    found = _state(response)["reservations"].get(reservation_id or "")
    if found is None:
        raise _error("InvalidCapacityReservationId.NotFound",
                     f"The capacity reservation ID '{reservation_id}' does not exist")
    return found


def _tags(response: Any) -> dict[str, str]:
    return dict(response._parse_tag_specification().get("capacity-reservation", {}))


def create_capacity_reservation(self: Any) -> Any:
    from moto.core.responses import ActionResult

    count = int(self._get_param("InstanceCount") or 0)
    if count < 1:
        raise _error("InvalidParameterValue", "InstanceCount must be at least 1")
    az, az_id = _zone(self, self._get_param("AvailabilityZone"))
    held = Held(f"cr-{_new_id(self._get_param('ClientToken'), _now(), az)}",
                self._get_param("InstanceType"), az, az_id, count, _now(),
                _when(self._get_param("EndDate")),
                platform=self._get_param("InstancePlatform") or "Linux/UNIX",
                tenancy=self._get_param("Tenancy") or "default", tags=_tags(self))
    _state(self)["reservations"][held.reservation_id] = held
    return ActionResult({"CapacityReservation": _shape(self, held)})


def cancel_capacity_reservation(self: Any) -> Any:
    from moto.core.responses import ActionResult

    _held(self, self._get_param("CapacityReservationId")).cancelled = True
    return ActionResult({"Return": True})


def describe_capacity_reservations(self: Any) -> Any:
    from moto.core.responses import ActionResult

    ids = self._get_param("CapacityReservationIds", []) or []
    chosen = [_held(self, i) for i in ids] if ids else list(
        _state(self)["reservations"].values())
    return ActionResult({"CapacityReservations": [_shape(self, h) for h in chosen]})


def _rate(instance_type: str, region: str) -> float:
    from clusterkit.catalog.prices import on_demand_price

    price = on_demand_price(instance_type, region)
    return FEE_FACTOR * price if price is not None else FALLBACK_RATE


def _offering(self: Any, row: int, az: str, start: datetime) -> dict[str, Any]:
    itype, count = self._get_param("InstanceType"), int(self._get_param("InstanceCount"))
    hours = int(self._get_param("CapacityDurationHours"))
    fee = _rate(itype, self.region) * count * hours * (1.0 if row == 0 else 0.95)
    return {"CapacityBlockOfferingId": f"cb-{_new_id(itype, count, az, start, hours)}",
            "InstanceType": itype, "AvailabilityZone": az, "InstanceCount": count,
            "StartDate": start, "EndDate": start + timedelta(hours=hours),
            "CapacityBlockDurationHours": hours, "UpfrontFee": f"{fee:.2f}",
            "CurrencyCode": "USD", "Tenancy": "default"}


def describe_capacity_block_offerings(self: Any) -> Any:
    from moto.core.responses import ActionResult

    itype = str(self._get_param("InstanceType") or "")
    if not itype.startswith(tuple(f"{f}." for f in BLOCK_FAMILIES)):
        return ActionResult({"CapacityBlockOfferings": []})
    base = _when(self._get_param("StartDateRange")) or _now()
    zones = sorted(z.name for z in self.ec2_backend.describe_availability_zones())[:2]
    offers = [_offering(self, row, az, base + row * DAY) for row, az in enumerate(zones)]
    _state(self)["offerings"].update((o["CapacityBlockOfferingId"], o) for o in offers)
    return ActionResult({"CapacityBlockOfferings": offers})


def purchase_capacity_block(self: Any) -> Any:
    from moto.core.responses import ActionResult

    offering_id = self._get_param("CapacityBlockOfferingId")
    offer = _state(self)["offerings"].get(offering_id)
    if offer is None:
        raise _error("InvalidParameterValue", f"Capacity Block offering {offering_id} "
                     "is not available")
    az, az_id = _zone(self, offer["AvailabilityZone"])
    held = Held(f"cr-{_new_id(offering_id, _now())}", offer["InstanceType"], az, az_id,
                offer["InstanceCount"], offer["StartDate"], offer["EndDate"], block=True,
                platform=self._get_param("InstancePlatform") or "Linux/UNIX",
                tags=_tags(self))
    _state(self)["reservations"][held.reservation_id] = held
    return ActionResult({"CapacityReservation": _shape(self, held)})


def _launch_problem(self: Any, held: Held, market: str | None) -> str | None:
    """Why EC2 refuses this RunInstances into ``held`` (None: it fits)."""
    count = int(self._get_param("MinCount") or 1)
    if held.block != (market == "capacity-block"):
        return ("A Capacity Block reservation needs InstanceMarketOptions MarketType "
                "capacity-block" if held.block else "The capacity-block market type needs "
                "a Capacity Block reservation")
    state = held.state(_now())
    az = self._get_param("Placement.AvailabilityZone")
    fits = (state == "active" and self._get_param("InstanceType") == held.instance_type
            and az in (None, "", held.az)
            and held.total - _used(self, held.reservation_id) >= count)
    return None if fits else f"{NO_ROOM_TEXT} ({held.reservation_id} is {state})"


def _checked_run_instances(original: Any) -> Any:
    @functools.wraps(original)
    def run_instances(self: Any) -> Any:
        target = self._get_param("CapacityReservationSpecification.CapacityReservation"
                                 "Target.CapacityReservationId")
        market = self._get_param("InstanceMarketOptions.MarketType") or None
        held = _held(self, target) if target else None
        problem = _launch_problem(self, held, market) if held else (
            "The capacity-block market type needs a Capacity Block reservation"
            if market == "capacity-block" else None)
        if problem is not None:
            code = NO_ROOM if problem.startswith(NO_ROOM_TEXT) else "InvalidParameterValue"
            raise _error(code, problem)
        result = original(self)
        for instance in result.result.instances if held else ():
            instance.capacity_reservation_id = held.reservation_id
            instance.lifecycle = "capacity-block" if held.block else None
        return result

    run_instances.checks_reservations = True  # type: ignore[attr-defined]
    return run_instances


VERBS = (create_capacity_reservation, cancel_capacity_reservation,
         describe_capacity_reservations, describe_capacity_block_offerings,
         purchase_capacity_block)


def install() -> None:
    """Idempotent: teach moto's EC2 responses (in this process) the calls above."""
    from moto.ec2.responses import EC2Response

    for verb in VERBS:
        setattr(EC2Response, verb.__name__, verb)
    if not getattr(EC2Response.run_instances, "checks_reservations", False):
        EC2Response.run_instances = _checked_run_instances(EC2Response.run_instances)
