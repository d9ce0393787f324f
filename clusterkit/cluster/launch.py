"""Launch candidates and the gang launch: one RunInstances call for all missing nodes,
in one AZ, all or nothing; then wait until they run."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace

from clusterkit.aws import instances, lookup
from clusterkit.aws.offers import search_offers
from clusterkit.catalog.prices import on_demand_price
from clusterkit.catalog.ranking import (
    Offer,
    cheapest_excluded,
    describe_offer,
    launch_candidates,
    walk_candidates,
)
from clusterkit.cluster.dataset_checks import launch_mapping
from clusterkit.cluster.lookups import base_tags
from clusterkit.cluster.pins import launch_regions
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, CapacityError, ClusterkitError
from clusterkit.events import Stage
from clusterkit.kinds import DEAD_STATES, InstanceState, Market, MarketPolicy
from clusterkit.plan.dataset import CLONE_OF_TAG
from clusterkit.plan.nodes import (
    PRICE_TAG,
    Node,
    format_slots,
    launch_tags,
    node_index,
    node_order,
)
from clusterkit.plan.pinning import PinReport
from clusterkit.spec.model import Spec


def first_candidate(rt: Runtime | None, spec: Spec) -> Offer:
    """The spec's first instance type in the first AZ of its region: the candidate used
    when the offer search has nothing (offline, or the search failed)."""
    itype = spec.nodes.instance_types[0]
    az = f"{spec.region}a"
    if rt is not None:
        zones = lookup.availability_zones(rt.session, spec.region)
        az = zones[0]["name"] if zones else az
    market = Market.ON_DEMAND if spec.nodes.market == MarketPolicy.ON_DEMAND else Market.SPOT
    od = on_demand_price(itype, spec.region)
    price = od if market == Market.ON_DEMAND else None
    return Offer(itype, spec.region, az, None, market, price, od, 0)


def ranked_or_refused(spec: Spec, offers: Sequence[Offer],
                      regions: Sequence[str]) -> list[Offer]:
    """``launch_candidates`` of ``offers``; when they leave none although some offer had
    a price, ClusterkitError (exit 1) naming the cheapest offer left out and why: `up`
    never falls back to an offer the spec excludes."""
    kept = launch_candidates(offers, count=spec.nodes.count, market_policy=spec.nodes.market,
                             max_price=spec.nodes.max_price,
                             instance_types=spec.nodes.instance_types, regions=regions)
    if kept:
        return kept
    cheapest = cheapest_excluded(offers, market_policy=spec.nodes.market,
                                 max_price=spec.nodes.max_price,
                                 instance_types=spec.nodes.instance_types, regions=regions)
    if cheapest is None:
        return []
    limit = spec.nodes.max_price
    what = (f"nodes.max_price ${limit:g}/h excludes every offer" if limit is not None
            else "every offer is excluded")
    raise ClusterkitError(f"nothing to launch: {what}; the cheapest left out is {cheapest}",
                          "raise nodes.max_price, or add instance types, regions or the "
                          "on-demand market (`clusterkit spot SPEC` lists every offer)")


def candidates(rt: Runtime, spec: Spec, region: str | None = None,
               report: PinReport | None = None) -> list[Offer]:
    """Ranked offers from the spot search, only in the regions (``region``: --region,
    honoured or rejected) where every pinned resource exists (``report``, else looked
    up here); the first-candidate fallback in the first such region if the search fails."""
    if report is None:
        report = launch_regions(rt, spec, region)
        for line in report.lines():
            rt.info(f"pinned: {line}")
    regions = report.qualifying
    fallback = replace(spec, region=regions[0])
    try:
        result = search_offers(rt.session, instance_types=spec.nodes.instance_types,
                               regions=regions, count=spec.nodes.count)
    except AwsError as exc:
        rt.warn(f"offer search failed ({exc}); using the spec's first type")
        return [first_candidate(rt, fallback)]
    for where, why in sorted(result.region_errors.items()):
        rt.warn(f"no offers from {where}: {why}")
    if not result.offers:
        return [first_candidate(rt, fallback)]
    return ranked_or_refused(spec, result.offers, regions)


def scale_candidates(rt: Runtime, spec: Spec, nodes: Sequence[Node]) -> list[Offer]:
    """Offers for nodes added to a running cluster: its region, AZ and type (the
    placement group is its stack's), in the order of a first launch, so capacity falls
    back as it would there (spot, then on-demand under spot-then-on-demand); the
    master's own offer when the search has none."""
    base = offer_of(nodes)
    same = [o for o in candidates(rt, spec)
            if (o.region, o.az, o.instance_type) == (base.region, base.az, base.instance_type)]
    return same or [base]


def offer_of(nodes: Sequence[Node]) -> Offer:
    """The offer new nodes of an existing cluster use: the master's type, AZ, market."""
    first = sorted((n for n in nodes if n.live), key=node_order)[0]
    od = on_demand_price(first.instance_type, first.region)
    price = first.price if first.price is not None else (
        od if first.market == Market.ON_DEMAND else None)
    return Offer(first.instance_type, first.region, first.az, None, first.market, price, od, 0)


def client_token(stack_id: str, slots: Sequence[int], offer: Offer) -> str:
    """Same stack + same slots + same offer => same token, so a retried RunInstances is
    not a second launch. A new stack (after `down`) gives new tokens."""
    text = f"{stack_id}|{format_slots(slots)}|{offer.instance_type}|{offer.az}|{offer.market}"
    return "ck-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def gang_launch(rt: Runtime, spec: Spec, offer: Offer, slots: Sequence[int], *,
                launch_template_id: str, subnet_id: str, stack_id: str,
                placement_group: str = "") -> list[Node]:
    volume_tags = {**base_tags(spec), **launch_tags(spec.name, slots)}
    mapping = launch_mapping(spec, spec.storage.dataset.size_gb if spec.storage.dataset
                             else None)
    if mapping:  # every volume of the launch alike; only the clone's SnapshotId matches
        volume_tags[CLONE_OF_TAG] = mapping[0]["Ebs"]["SnapshotId"]
    tags = dict(volume_tags)
    if offer.price is not None:
        tags[PRICE_TAG] = f"{offer.price:.4f}"
    launched = instances.run_instances(
        rt.session, offer.region, launch_template_id=launch_template_id,
        instance_type=offer.instance_type, az=offer.az or "", subnet_id=subnet_id,
        market=offer.market, max_price=spec.nodes.max_price, count=len(slots), tags=tags,
        volume_tags=volume_tags, client_token=client_token(stack_id, slots, offer),
        placement_group=placement_group, block_devices=mapping)
    # The creation tags are on the instances whether or not the response echoes them.
    return [replace(n, tags={**tags, **n.tags},
                    index=node_index({**tags, **n.tags}, n.launch_index))
            for n in launched]


def capacity_hint(market_policy: str) -> str:
    """What to try when no offer had capacity, fitting the spec's market: on-demand is
    suggested only where the spec does not already allow it."""
    if market_policy == MarketPolicy.SPOT:
        return ("try later, add instance types or regions, or allow on-demand "
                "(nodes.market: spot-then-on-demand)")
    return "try later, or add instance types or regions"


def walk(rt: Runtime, offers: Sequence[Offer], try_launch: Callable[[Offer], list[Node]],
         *, market_policy: str = MarketPolicy.SPOT) -> tuple[Offer, list[Node]]:
    """``walk_candidates`` with every attempt and its outcome printed: capacity errors
    move on; quota, credential and other errors stop at once. When every offer lacked
    capacity, the hint fits ``market_policy``."""
    numbers = iter(range(1, len(offers) + 1))

    def attempt(offer: Offer) -> list[Node]:
        rt.started(Stage.LAUNCH,
                   f"launch attempt {next(numbers)}/{len(offers)}: {describe_offer(offer)}")
        try:
            return try_launch(offer)
        except CapacityError as exc:
            rt.warn(f"no capacity: {exc.code}: {exc.message}", level=1, stage=Stage.LAUNCH)
            raise
        except AwsError as exc:
            rt.error(f"failed: {exc.message}", level=1, stage=Stage.LAUNCH)
            raise

    try:
        offer, attempts = walk_candidates(offers, attempt)
    except CapacityError as exc:
        if offers:  # tried them all (none at all: the hint says how to get candidates)
            exc.hint = capacity_hint(market_policy)
        raise
    return offer, attempts[-1].result


def _dead(nodes: Sequence[Node], when: str) -> None:
    dead = [n for n in nodes if n.state in DEAD_STATES]
    if dead:
        why = "spot capacity was reclaimed (or a node was stopped)" if any(
            n.market == Market.SPOT for n in dead) else "a node was stopped or terminated"
        raise CapacityError(
            f"{len(dead)} node(s) stopped {when}: "
            + ", ".join(f"{n.instance_id} {n.state}" for n in dead),
            f"{why}; clusterkit terminated the nodes of this launch, run `clusterkit up` "
            "again")


def check_alive(rt: Runtime, region: str, ids: Sequence[str]) -> None:
    """CapacityError when any of the nodes is stopping or terminated."""
    _dead(instances.describe_nodes(rt.session, region, ids), "while waiting for SSH")


def wait_running(rt: Runtime, region: str, ids: Sequence[str], *, deadline: float) -> list[Node]:
    """Poll until every instance is running. A node that dies meanwhile aborts the
    launch: the caller terminates the whole batch (never half a cluster)."""
    def probe() -> tuple[bool, list[Node]]:
        nodes = instances.describe_nodes(rt.session, region, ids)
        _dead(nodes, "before running")
        return (len(nodes) == len(ids)
                and all(n.state == InstanceState.RUNNING for n in nodes)), nodes

    return rt.wait_until(probe, deadline=deadline, late=lambda _nodes: AwsError(
        f"nodes not running before the deadline: {', '.join(ids)}",
        "run `clusterkit up` again to resume, or `clusterkit down`"))
