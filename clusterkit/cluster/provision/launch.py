"""Launch candidates and the gang launch: one RunInstances call for all missing nodes,
in one AZ, all or nothing; then wait until they run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from clusterkit.aws import addresses, instances, lookup
from clusterkit.catalog.prices import on_demand_price
from clusterkit.catalog.ranking import (
    Offer,
    describe_offer,
    walk_candidates,
)
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, CapacityError
from clusterkit.events import Kind, Stage
from clusterkit.kinds import DEAD_STATES, InstanceState, Market, MarketPolicy
from clusterkit.plan.launch import base_tags, launch_parts, launch_request
from clusterkit.plan.nodes import (
    Node,
    node_index,
)
from clusterkit.plan.stack import metadata_hop_limit
from clusterkit.remote.incluster import controller_public_keys
from clusterkit.spec.model import Spec


def first_candidate(rt: Runtime | None, spec: Spec) -> Offer:
    """The spec's first instance type in the first AZ of its region: the candidate used
    when the offer search has nothing (offline, or the search failed)."""
    itype = spec.nodes.instance_types[0]
    az = f"{spec.region}a"
    if rt is not None:
        zones = lookup.availability_zones(rt.session, spec.region)
        az = zones[0]["name"] if zones else az
    market = MarketPolicy(spec.nodes.market).markets[0]  # spot first where spot may be
    od = on_demand_price(itype, spec.region)
    # on-demand at its price; a Capacity Block was paid upfront; spot: not known here
    price = {Market.ON_DEMAND: od, Market.CAPACITY_BLOCK: 0.0}.get(market)
    return Offer(itype, spec.region, az, None, market, price, od, 0)


def gang_launch(rt: Runtime, spec: Spec, offer: Offer, slots: Sequence[int], *,
                launch_template_id: str, subnet_id: str, stack_id: str,
                placement_group: str = "", standby_of: str = "",
                security_group: str = "") -> list[Node]:
    """One RunInstances for every node of ``slots`` (plan.launch.launch_request);
    ``standby_of``: a standby for the one node of ``slots``, that instance. Launched by
    the master's controller, the nodes authorize its key too. A master launched with
    several network interfaces (EFA) gets the cluster's Elastic IP."""
    request = launch_request(spec, offer, slots, stack_id, standby_of,
                             authorized_keys=controller_public_keys())
    launched = instances.run_instances(
        rt.session, offer.region, request, launch_template_id=launch_template_id,
        subnet_id=subnet_id, security_group=security_group, placement_group=placement_group,
        metadata_hops=metadata_hop_limit(spec))
    # The creation tags are on the instances whether or not the response echoes them.
    nodes = [replace(n, tags={**request.tags, **n.tags},
                     index=node_index({**request.tags, **n.tags}, n.launch_index))
             for n in launched]
    if request.public_address:
        public_address(rt, spec, next(n for n in nodes if n.index == 0))
    return nodes


def public_address(rt: Runtime, spec: Spec, master: Node) -> None:
    """The cluster's Elastic IP on the master's primary interface: EC2 gives no public
    IP to an instance launched with several network interfaces."""
    if not master.primary_interface:
        raise AwsError(f"{master.instance_id} has no primary network interface to give "
                       "an Elastic IP", "run `clusterkit up` again: it reuses the address",
                       resource=master.instance_id)
    address = addresses.attach_public_address(
        rt.session, master.region, spec.name, master.primary_interface, base_tags(spec))
    rt.done(Stage.LAUNCH, f"{master.instance_id}: Elastic IP {address.public_ip} "
            f"({address.allocation_id}; several network interfaces get no public IP)")


def launch_all(rt: Runtime, spec: Spec, offer: Offer, slots: Sequence[int], *,
               launch_template_id: str, subnet_id: str, stack_id: str,
               placement_group: str = "", security_group: str = "") -> list[Node]:
    """``gang_launch`` of ``slots`` at ``offer``, in the calls ``plan.launch.launch_parts``
    says (a master set apart by ``nodes.master.market`` first, in its market); when a
    later call fails, what the earlier ones launched is terminated (never half a
    cluster) and the error goes on to the candidate walk."""
    launched: list[Node] = []
    try:
        for part, part_slots in launch_parts(spec, offer, slots):
            launched += gang_launch(rt, spec, part, part_slots,
                                    launch_template_id=launch_template_id,
                                    subnet_id=subnet_id, stack_id=stack_id,
                                    placement_group=placement_group,
                                    security_group=security_group)
    except BaseException:
        terminate_launch(rt, offer.region, [n.instance_id for n in launched])
        raise
    return launched


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


def terminate_launch(rt: Runtime, region: str, ids: Sequence[str]) -> None:
    """Terminate the nodes of a launch that cannot be finished (never half a cluster)."""
    if ids:
        rt.emit(Kind.ERROR, f"terminating the {len(ids)} node(s) of this launch",
                stage=Stage.TERMINATE)
        instances.terminate_instances(rt.session, region, list(ids))
