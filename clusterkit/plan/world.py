"""What `up` read of the world, once, before it plans: one typed record the pure plan
is made from (``plan.up.plan_up``), so the plan the user confirms is a function of what
was observed and of the spec alone, and tests give it as data
(tests/unit/plan_up_cases/). It is also what a saved plan keeps (`plan --out`): `up
--plan` observes again and applies only if ``differences`` finds none. PURE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.zones import ZoneType
from clusterkit.kinds import Market, ReservationState
from clusterkit.plan.nodes import Node
from clusterkit.plan.reservation import Reservation
from clusterkit.plan.stack import Facts

EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class StackSeen:
    """The cluster's stack as DescribeStacks showed it."""

    status: str
    parameters: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    stack_id: str = ""
    outputs: Mapping[str, str] = field(default_factory=lambda: EMPTY)

    @property
    def in_progress(self) -> bool:
        return self.status.endswith("_IN_PROGRESS")

    @classmethod
    def of(cls, described: Mapping[str, Any] | None) -> StackSeen | None:
        """From aws.stack.describe_stack's answer (None: there is no stack)."""
        if not described:
            return None
        return cls(described["status"], MappingProxyType(dict(described["parameters"])),
                   described.get("id", ""), MappingProxyType(dict(described.get("outputs", {}))))


@dataclass(frozen=True)
class DatasetSeen:
    """The spec's dataset snapshot as checked in the region: each clone's size, and
    what the check warned about."""

    snapshot_id: str
    size_gib: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observed:
    """One read of the region `up` applies to.

    region: the nodes' region, or (a new cluster) the first ranked offer's; nodes: the
    cluster's instances found by tag; stack: None when there is none; facts: what the
    stack's parameters depend on besides the spec (VPC, AMI, key, SSH source, kept EFS);
    offers: the offer search as it answered (unranked: ``plan_up`` ranks them), in
    ``regions`` (where every pinned resource exists); fallback: the offer used when the
    search had none; dataset: the spec's snapshot as checked; notes: what the reads found
    worth saying (pinned resources, regions the search could not reach); subnets: the
    VPC's subnet per AZ (read when nodes are to be launched)."""

    region: str
    nodes: tuple[Node, ...]
    stack: StackSeen | None
    facts: Facts | None
    key_pair_missing: bool
    offers: tuple[Offer, ...] = ()
    regions: tuple[str, ...] = ()
    fallback: Offer | None = None
    dataset: DatasetSeen | None = None
    notes: tuple[str, ...] = ()
    subnets: Mapping[str, str] = field(default_factory=lambda: EMPTY)  # AZ -> subnet id
    reservation: Reservation | None = None  # nodes.capacity_reservation's, as read

    def to_json(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Observed:
        stack, facts, dataset = data.get("stack"), data.get("facts"), data.get("dataset")
        return cls(
            region=data["region"], nodes=tuple(_node(n) for n in data["nodes"]),
            stack=None if stack is None else StackSeen(
                stack["status"], MappingProxyType(dict(stack["parameters"])),
                stack.get("stack_id", ""), MappingProxyType(dict(stack.get("outputs", {})))),
            facts=None if facts is None else Facts(**facts),
            key_pair_missing=bool(data["key_pair_missing"]),
            offers=tuple(_offer(o) for o in data.get("offers", ())),
            regions=tuple(data.get("regions", ())),
            fallback=_offer(data["fallback"]) if data.get("fallback") else None,
            dataset=None if dataset is None else DatasetSeen(
                dataset["snapshot_id"], int(dataset["size_gib"]), tuple(dataset["warnings"])),
            notes=tuple(data.get("notes", ())),
            subnets=MappingProxyType(dict(data.get("subnets", {}))),
            reservation=Reservation.from_json(data["reservation"]) if data.get(
                "reservation") else None)


def _plain(value: Any) -> Any:
    """A record as JSON values: dataclasses field by field, mappings (read-only ones too:
    ``asdict`` would deep-copy them, and a ``mappingproxy`` cannot be copied), enums and
    tuples made plain."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def _node(data: Mapping[str, Any]) -> Node:
    known = {f.name for f in fields(Node)}
    values = {k: v for k, v in data.items() if k in known}
    values["market"] = Market(values["market"])
    values["tags"] = MappingProxyType(dict(values.get("tags", {})))
    values["volume_ids"] = tuple(values.get("volume_ids", ()))
    return Node(**values)


def _offer(data: Mapping[str, Any]) -> Offer:
    values = dict(data)
    values["market"] = Market(values["market"])
    values["zone_type"] = ZoneType(values.get("zone_type", ZoneType.AVAILABILITY_ZONE.value))
    return Offer(**values)


def _node_key(node: Node) -> tuple[str, str]:
    return node.instance_id, str(node.state)


def _offer_key(offer: Offer) -> tuple[str, str, str, str]:
    return offer.instance_type, offer.region, offer.az or "", str(offer.market)


def node_differences(saved: Observed, now: Observed) -> list[str]:
    """Nodes that appeared, vanished or changed state since ``saved`` was read."""
    before = {n.instance_id: n for n in saved.nodes if n.live}
    after = {n.instance_id: n for n in now.nodes if n.live}
    out = [f"node {iid} ({after[iid].name}) appeared, {after[iid].state}"
           for iid in after if iid not in before]
    out += [f"node {iid} ({before[iid].name}) is gone" for iid in before if iid not in after]
    out += [f"node {iid} was {before[iid].state}, is now {after[iid].state}"
            for iid in before if iid in after and before[iid].state != after[iid].state]
    return out


def stack_differences(saved: Observed, now: Observed) -> list[str]:
    """The stack created, deleted, or changed in status or parameters."""
    was, is_ = saved.stack, now.stack
    if was is None and is_ is None:
        return []
    if was is None or is_ is None:
        return [f"the stack {'appeared' if was is None else 'is gone'}"
                + (f" ({is_.status})" if is_ else "")]
    out = [f"the stack was {was.status}, is now {is_.status}"] if was.status != is_.status \
        else []
    keys = sorted(set(was.parameters) | set(is_.parameters))
    out += [f"stack parameter {k} was {was.parameters.get(k)!r}, is now "
            f"{is_.parameters.get(k)!r}" for k in keys
            if was.parameters.get(k) != is_.parameters.get(k)]
    return out


def offer_differences(saved: Observed, now: Observed, candidates: Sequence[Offer],
                      ceiling: float | None) -> list[str]:
    """The plan's ``candidates`` that the saved search had and the new one lacks, and
    any now dearer than ``ceiling`` (the $/h per node the user confirmed, at worst).
    None when ``now`` made no search (it has nothing to place: no offer is "gone")."""
    if not now.regions:
        return []
    searched = {_offer_key(o) for o in saved.offers}
    current = {_offer_key(o): o for o in now.offers}
    out = []
    for offer in (c for c in candidates if _offer_key(c) in searched):
        new = current.get(_offer_key(offer))
        where = f"{offer.instance_type} {offer.market} in {offer.az or offer.region}"
        if new is None:
            out.append(f"offer {where} is gone")
        elif ceiling is not None and new.price is not None and new.price > ceiling:
            out.append(f"offer {where} costs ${new.price:.4f}/h, above the "
                       f"${ceiling:.4f}/h confirmed")
    return out


def differences(saved: Observed, now: Observed, candidates: Sequence[Offer] = (),
                ceiling: float | None = None) -> list[str]:
    """What changed between the observation a plan was made from and a new one, in
    words, one per difference (empty: the plan still holds)."""
    out = [] if saved.region == now.region else [
        f"region was {saved.region}, is now {now.region}"]
    out += node_differences(saved, now) + stack_differences(saved, now)
    if saved.facts and now.facts:
        out += [f"{f.name} was {getattr(saved.facts, f.name)!r}, is now "
                f"{getattr(now.facts, f.name)!r}" for f in fields(Facts)
                if getattr(saved.facts, f.name) != getattr(now.facts, f.name)]
    if saved.key_pair_missing != now.key_pair_missing:
        out.append("the key pair " + ("is gone" if now.key_pair_missing else "appeared"))
    if saved.dataset != now.dataset:
        out.append("the dataset snapshot check changed")
    out += reservation_differences(saved.reservation, now.reservation)
    return out + offer_differences(saved, now, candidates, ceiling)


def reservation_differences(saved: Reservation | None, now: Reservation | None) -> list[str]:
    """The reservation's state, room or place changed since it was read (its clock,
    ``read_at``, moves by itself)."""
    if saved is None or now is None:
        return [] if saved is now else ["the capacity reservation read changed"]
    started = saved.waits and now.state == ReservationState.ACTIVE  # as the plan waited for
    keys = ("available", "instance_type", "az", "end") + (() if started else ("state",))
    return [f"{saved.reservation_id} {key} was {getattr(saved, key)}, is now "
            f"{getattr(now, key)}" for key in keys if getattr(saved, key) != getattr(now, key)]
