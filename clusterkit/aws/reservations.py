"""Capacity reservations: read one (DescribeCapacityReservations), list Capacity Block
offerings (DescribeCapacityBlockOfferings) and buy one (PurchaseCapacityBlock). Nothing
here cancels or modifies a reservation: `down` leaves them to their owner."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import tag_specs
from clusterkit.kinds import ReservationKind, ReservationState
from clusterkit.plan.blocks import BLOCK_TAG, BlockOffering
from clusterkit.plan.reservation import PLATFORM, TENANCY, Reservation

if TYPE_CHECKING:
    import boto3

# What EC2 answers for an id it does not have in the region (or cannot read as one).
NOT_FOUND = frozenset({"InvalidCapacityReservationId.NotFound",
                       "InvalidCapacityReservationId.Malformed"})


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def _epoch(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def _state(text: str) -> ReservationState:
    try:
        return ReservationState(text)
    except ValueError:  # a state newer than this list: not one to launch into
        return ReservationState.UNAVAILABLE


def to_reservation(raw: Mapping[str, Any], region: str, read_at: float) -> Reservation:
    """The one place a DescribeCapacityReservations dict becomes a ``Reservation``."""
    kind = ReservationKind.CAPACITY_BLOCK if raw.get("ReservationType") == "capacity-block" \
        else ReservationKind.ODCR
    return Reservation(
        reservation_id=raw["CapacityReservationId"], region=region,
        instance_type=raw.get("InstanceType", ""), az=raw.get("AvailabilityZone", ""),
        az_id=raw.get("AvailabilityZoneId", ""), total=int(raw.get("TotalInstanceCount", 0)),
        available=int(raw.get("AvailableInstanceCount", 0)), state=_state(raw.get("State", "")),
        kind=kind, platform=raw.get("InstancePlatform", PLATFORM),
        tenancy=raw.get("Tenancy", TENANCY), start=_epoch(raw.get("StartDate")),
        end=_epoch(raw.get("EndDate")), read_at=read_at)


def describe_reservation(session: boto3.Session, region: str, reservation_id: str,
                         read_at: float) -> Reservation | None:
    """The reservation as EC2 describes it now (``read_at``: the caller's clock), or None
    when ``region`` has no such reservation."""
    with aws_call("DescribeCapacityReservations", f"{reservation_id} in {region}",
                  expected=NOT_FOUND) as call:
        found = _ec2(session, region).describe_capacity_reservations(
            CapacityReservationIds=[reservation_id])["CapacityReservations"]
    if call.expected_error or not found:
        return None
    return to_reservation(found[0], region, read_at)


def _offering(raw: Mapping[str, Any]) -> BlockOffering:
    try:
        fee: float | None = float(raw["UpfrontFee"])
    except (KeyError, TypeError, ValueError):
        fee = None
    return BlockOffering(
        offering_id=raw["CapacityBlockOfferingId"], instance_type=raw.get("InstanceType", ""),
        az=raw.get("AvailabilityZone", ""), count=int(raw.get("InstanceCount", 0)),
        start=_epoch(raw.get("StartDate")) or 0.0, end=_epoch(raw.get("EndDate")) or 0.0,
        hours=int(raw.get("CapacityBlockDurationHours", 0)), fee=fee,
        currency=raw.get("CurrencyCode") or "USD")


def block_offerings(session: boto3.Session, region: str, *, instance_type: str, count: int,
                    hours: int, start_after: datetime | None = None) -> list[BlockOffering]:
    """Every Capacity Block offering for ``count`` x ``instance_type`` lasting ``hours``
    (starting no earlier than ``start_after``), in AWS's order."""
    params: dict[str, Any] = {"InstanceType": instance_type, "InstanceCount": count,
                              "CapacityDurationHours": hours}
    if start_after is not None:
        params["StartDateRange"] = start_after
    with aws_call("DescribeCapacityBlockOfferings",
                  f"{count} x {instance_type} for {hours} h in {region}"):
        pages = _ec2(session, region).get_paginator(
            "describe_capacity_block_offerings").paginate(**params)
        raw = [o for page in pages for o in page.get("CapacityBlockOfferings", ())]
    return [_offering(o) for o in raw]


def purchase_block(session: boto3.Session, region: str, offering_id: str,
                   read_at: float) -> Reservation:
    """Buy the offering (paid now), tagged as clusterkit's from its purchase on (BLOCK_TAG:
    the offering): the block's reservation."""
    with aws_call("PurchaseCapacityBlock", f"{offering_id} in {region}"):
        raw = _ec2(session, region).purchase_capacity_block(
            CapacityBlockOfferingId=offering_id, InstancePlatform=PLATFORM,
            TagSpecifications=tag_specs(["capacity-reservation"], {BLOCK_TAG: offering_id}))
    return to_reservation(raw["CapacityReservation"], region, read_at)
