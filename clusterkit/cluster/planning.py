"""`clusterkit plan`: what `up` would do, read-only. ``offline`` uses only the shipped
catalog and price snapshot and assumes no cluster exists yet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from clusterkit.aws import stack as cfn
from clusterkit.catalog import instances as catalog
from clusterkit.catalog.prices import on_demand_price, spot_snapshot
from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.zones import ZoneType, label, zone_block, zone_type
from clusterkit.cluster import launch
from clusterkit.cluster.caller import ssh_source_cidr
from clusterkit.cluster.dataset_checks import check_dataset
from clusterkit.cluster.lookups import facts, key_pair_missing
from clusterkit.cluster.pins import checked_regions, pin_report, same_region
from clusterkit.cluster.runtime import Runtime
from clusterkit.cluster.target import find_nodes
from clusterkit.kinds import Market
from clusterkit.plan.dataset import dataset_cost
from clusterkit.plan.nodes import node_actions
from clusterkit.plan.observed import Observed, StackSeen
from clusterkit.plan.pinning import offline_lines, pinned_resources
from clusterkit.plan.spend import EBS_GB_MONTH, HOURS_PER_MONTH
from clusterkit.plan.stack import stack_name
from clusterkit.plan.up import UpPlan, gpu_warnings, plan_up
from clusterkit.spec.model import Spec


def snapshot_offers(spec: Spec, regions: Sequence[str] = ()) -> list[Offer]:
    """Offers from the shipped price snapshot (zone ids stand in for zone names). Local
    and Wavelength Zones are blocked: offline, opt-in and subnet cannot be checked."""
    offers = []
    for itype in spec.nodes.instance_types:
        known = catalog.lookup(itype)
        gpus = known.gpu_count if known else 0
        for region in regions or spec.regions or (spec.region,):
            od = on_demand_price(itype, region)
            for az_id, price in sorted(spot_snapshot(itype, region).items()):
                kind = zone_type(az_id)
                offers.append(Offer(itype, region, az_id, az_id, Market.SPOT, price, od, gpus,
                                    zone_type=kind, blocked=zone_block(
                                        kind, opted_in=None, has_subnet=None)))
            offers.append(Offer(itype, region, f"{region} (any AZ)", None, Market.ON_DEMAND, od,
                                od, gpus))
    return offers


def zone_lines(offers: Sequence[Offer]) -> list[str]:
    """One line per offer in a Local or Wavelength Zone that was not ranked, and why."""
    return [f"{o.az} is a {label(o.zone_type)} of {o.region} ({o.instance_type} {o.market} "
            f"${o.price:.4f}/h): not ranked; it needs opt-in to its zone group and a "
            "subnet in the VPC" for o in sorted(offers, key=lambda o: (o.price or 0, o.az or ""))
            if o.blocked and o.zone_type is not ZoneType.AVAILABILITY_ZONE
            and o.price is not None]


def plan_offline(spec: Spec, region: str | None = None) -> UpPlan:
    """No AWS call: the shipped snapshot, Local Zones marked, pinned resources unchecked."""
    regions = checked_regions(spec, region)
    offers = snapshot_offers(spec, regions)
    cands = launch.ranked_or_refused(spec, offers, regions)
    offer = cands[0] if cands else launch.first_candidate(None, replace(spec, region=regions[0]))
    notes = ["offline: prices from the shipped snapshot; assumes no cluster exists yet",
             *offline_lines(pinned_resources(spec)), *zone_lines(offers)]
    if region:
        notes.append(f"--region {region}: only {region} of the spec's regions")
    observed = Observed(offer.region, (), None, None, key_pair_missing=not spec.ssh.key_name,
                        candidates=tuple(cands or [offer]))
    plan = plan_up(spec, observed, notes)
    return replace(plan, warnings=gpu_warnings(spec, plan))


def plan_online(rt: Runtime, spec: Spec, only_region: str | None = None) -> UpPlan:
    """What `up` would do. Pinned resources are looked up in the cluster's region, or
    (new cluster) in every allowed region; a line per resource says where it was found."""
    allowed = checked_regions(spec, only_region)  # before any AWS call
    region, nodes = find_nodes(rt, spec.name, spec.regions)
    same_region(spec, region, only_region)
    report = pin_report(rt, spec, [region] if region else allowed)
    notes = [f"pinned: {line}" for line in report.lines()]
    if only_region:
        notes.append(f"--region {only_region}: only {only_region} of the spec's regions")
    cands: list[Offer] = []
    if node_actions(spec.name, spec.nodes.count, nodes).launch:
        cands = [launch.offer_of(nodes)] if region else \
            launch.candidates(rt, spec, only_region, report)
    region = region or (cands[0].region if cands else allowed[0])
    current = cfn.describe_stack(rt.session, region, stack_name(spec.name))
    cidr = ssh_source_cidr(spec)  # the caller's address: the one lookup outside AWS
    found = facts(rt, spec, region, current=current["parameters"] if current else None,
                  ssh_cidr=cidr)
    notes += dataset_notes(rt, spec, region, len(node_actions(spec.name, spec.nodes.count,
                                                               nodes).launch))
    stack = StackSeen.of(current)
    observed = Observed(region, tuple(nodes), stack, found, key_pair_missing(rt, spec, region),
                        tuple(cands))
    plan = plan_up(spec, observed, notes)
    return replace(plan, warnings=gpu_warnings(spec, plan))


def dataset_notes(rt: Runtime, spec: Spec, region: str, launch: int) -> list[str]:
    """The dataset clones a launch makes, priced at the snapshot's size (the snapshot
    checked as `up` checks it: exit 2 naming it when it would be refused)."""
    ds = spec.storage.dataset
    if ds is None or not ds.snapshot or not launch:
        return []
    verdict = check_dataset(rt, spec, region)
    cost = dataset_cost(ds, launch, verdict.size_gib if verdict else ds.size_gb, EBS_GB_MONTH)
    return [*(verdict.warnings if verdict else ()), *cost.lines(ds, HOURS_PER_MONTH)]


def do_plan(spec_file: str, *, offline: bool = False, profile: str | None = None,
            rt: Runtime | None = None, region: str | None = None) -> UpPlan:
    """``region`` (--region): plan for that one of the spec's regions, or exit 2. The
    plan's lines (plan.up.plan_lines) and JSON (``to_json``) are how it is shown."""
    from clusterkit.spec import load

    spec = load(spec_file)
    if offline:
        return plan_offline(spec, region)
    rt = rt or Runtime.make(region=spec.region, profile=profile)
    return plan_online(rt, spec, region)
