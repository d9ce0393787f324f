"""`clusterkit plan`: what `up` would do, read-only. ``offline`` uses only the shipped
catalog and price snapshot and assumes no cluster exists yet."""

from __future__ import annotations

from typing import Any

from clusterkit.aws import stack as cfn
from clusterkit.catalog import instances as catalog
from clusterkit.catalog.prices import on_demand_price, spot_snapshot
from clusterkit.catalog.ranking import Offer, launch_candidates
from clusterkit.cluster import launch
from clusterkit.cluster.common import Runtime, facts, find_nodes, key_pair_missing
from clusterkit.plan.nodes import node_actions
from clusterkit.plan.stack import stack_name, stack_parameters
from clusterkit.plan.up import Choice, UpPlan, plan_lines, plan_up
from clusterkit.spec.model import Spec


def _choice(offer: Offer | None) -> Choice | None:
    if offer is None:
        return None
    return Choice(offer.instance_type, offer.region, offer.az or offer.az_id, offer.market,
                  offer.price)


def snapshot_offers(spec: Spec) -> list[Offer]:
    """Offers from the shipped price snapshot (zone ids stand in for zone names)."""
    offers = []
    for itype in spec.nodes.instance_types:
        known = catalog.lookup(itype)
        gpus = known.gpu_count if known else 0
        for region in spec.regions or (spec.region,):
            od = on_demand_price(itype, region)
            for az_id, price in sorted(spot_snapshot(itype, region).items()):
                offers.append(Offer(itype, region, az_id, az_id, "spot", price, od, gpus))
            offers.append(Offer(itype, region, f"{region} (any AZ)", None, "on-demand", od,
                                od, gpus))
    return offers


def plan_offline(spec: Spec) -> UpPlan:
    cands = launch_candidates(snapshot_offers(spec), count=spec.nodes.count,
                              market_policy=spec.nodes.market, max_price=spec.nodes.max_price,
                              instance_types=spec.nodes.instance_types, regions=spec.regions)
    offer = cands[0] if cands else launch.first_candidate(None, spec)
    notes = ["offline: prices from the shipped snapshot; assumes no cluster exists yet"]
    return UpPlan(spec.name, offer.region, "create", (), "none" if spec.ssh.key_name
                  else "import", node_actions(spec.name, spec.nodes.count, []),
                  _choice(offer), (), tuple(notes))


def plan_online(rt: Runtime, spec: Spec) -> UpPlan:
    region, nodes = find_nodes(rt, spec.name, spec.regions)
    offer = None
    if node_actions(spec.name, spec.nodes.count, nodes).launch:
        offer = launch.offer_of(nodes) if region else \
            next(iter(launch.candidates(rt, spec)), None)
    region = region or (offer.region if offer else spec.region)
    current = cfn.describe_stack(rt.session, region, stack_name(spec.name))
    found = facts(rt, spec, region, current=current["parameters"] if current else None)
    return plan_up(spec, region=region, stack_status=current["status"] if current else None,
                   stack_params=current["parameters"] if current else None,
                   wanted_params=stack_parameters(spec, found),
                   key_pair_missing=key_pair_missing(rt, spec, region), nodes=nodes,
                   choice=_choice(offer))


def do_plan(spec_file: str, *, offline: bool = False, profile: str | None = None,
            rt: Runtime | None = None) -> tuple[UpPlan, list[str], dict[str, Any]]:
    from clusterkit.spec import load

    spec = load(spec_file)
    if offline:
        result = plan_offline(spec)
    else:
        rt = rt or Runtime.make(region=spec.region, profile=profile)
        result = plan_online(rt, spec)
    return result, plan_lines(result), result.to_json()
