"""What `up` read of the world, once, before it plans: one typed record the pure plan
is made from (``plan.up.plan_up``), so the plan the user confirms is a function of what
was observed and of the spec alone, and tests give it as data
(tests/unit/plan_up_cases/). It is also what a saved plan keeps (`plan --out`): `up
--plan` observes again and applies only if ``differences`` finds none. PURE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from clusterkit.catalog.ranking import Offer
from clusterkit.kinds import ReservationState
from clusterkit.plan.mounts import MountTarget
from clusterkit.plan.nodes import Node
from clusterkit.plan.profiles import profile_differences
from clusterkit.plan.reservation import Reservation
from clusterkit.plan.stack import Facts, StackRole
from clusterkit.plan.wire import from_plain, to_plain

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
class RegionSeen:
    """A region a fallback candidate launches in, read before the question as the
    plan's own region is: its stack, what the stack's parameters depend on, the key
    pair, the subnets."""

    region: str
    stack: StackSeen | None
    facts: Facts
    key_pair_missing: bool
    subnets: Mapping[str, str] = field(default_factory=lambda: EMPTY)  # AZ -> subnet id


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
    # the role CloudFormation runs the stack as (None: not read, the stack is unchanged)
    role: StackRole | None = None
    elsewhere: tuple[RegionSeen, ...] = ()  # the other regions the candidates reach
    # the subnets where the kept or made EFS already has a mount target (read only when
    # the cluster has a file system already and mounts it)
    mount_targets: tuple[str, ...] = ()
    # on the spec's own file system (storage.efs.file_system_id): its mount targets with
    # their security groups (plan.mounts: the one in the nodes' subnet is lent)
    lent_targets: tuple[MountTarget, ...] = ()
    # the cluster's instance profiles (plan.profiles) with the roles each holds; None:
    # not read (the cluster mounts no EFS, or nothing is to be made or given a profile)
    profiles: Mapping[str, tuple[str, ...]] | None = None

    def to_json(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Observed:
        """What ``to_json`` wrote (WireError, a ValueError, when it is not that)."""
        return from_plain(cls, dict(data))

    def seen_in(self, region: str) -> RegionSeen | None:
        """A fallback region as observed (None: the plan's own region, or not read)."""
        return next((r for r in self.elsewhere if r.region == region), None)


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
    if saved.profiles is not None and now.profiles is not None:
        out += profile_differences(saved.profiles, now.profiles)
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
