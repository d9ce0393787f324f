"""`clusterkit plan`: what `up` would do, read-only. ``offline`` uses only the shipped
catalog and price snapshot and assumes no cluster exists yet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from clusterkit.catalog import instances as catalog
from clusterkit.catalog.prices import on_demand_price, spot_snapshot
from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.zones import ZoneType, label, zone_block, zone_type
from clusterkit.cluster.provision import launch, savedplan
from clusterkit.cluster.provision.pins import checked_regions
from clusterkit.cluster.provision.survey import survey_up
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.kinds import Market
from clusterkit.plan.candidates import plan_candidates
from clusterkit.plan.pinning import offline_lines, pinned_resources
from clusterkit.plan.up import UpPlan, plan_up
from clusterkit.plan.world import Observed
from clusterkit.spec.model import Spec


def snapshot_offers(spec: Spec, regions: Sequence[str] = ()) -> list[Offer]:
    """Offers from the shipped price snapshot (zone ids stand in for zone names). Local
    and Wavelength Zones are blocked: offline, opt-in and subnet cannot be checked."""
    offers = []
    for itype in spec.nodes.instance_types:
        known = catalog.lookup(itype)
        gpus, vcpus = (known.gpu_count, known.vcpus) if known else (0, 0)
        for region in regions or spec.regions or (spec.region,):
            od = on_demand_price(itype, region)
            for az_id, price in sorted(spot_snapshot(itype, region).items()):
                kind = zone_type(az_id)
                offers.append(Offer(itype, region, az_id, az_id, Market.SPOT, price, od, gpus,
                                    zone_type=kind, blocked=zone_block(
                                        kind, opted_in=None, has_subnet=None), vcpus=vcpus))
            offers.append(Offer(itype, region, f"{region} (any AZ)", None, Market.ON_DEMAND, od,
                                od, gpus, vcpus=vcpus))
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
    fallback = launch.first_candidate(None, replace(spec, region=regions[0]))
    notes = ["offline: prices from the shipped snapshot; assumes no cluster exists yet",
             *offline_lines(pinned_resources(spec)), *zone_lines(offers)]
    if region:
        notes.append(f"--region {region}: only {region} of the spec's regions")
    seen = Observed(regions[0], (), None, None, key_pair_missing=not spec.ssh.key_name,
                    offers=tuple(offers), regions=tuple(regions), fallback=fallback)
    first = plan_candidates(spec, seen)
    return plan_up(spec, replace(seen, region=first[0].region if first else regions[0]),
                   notes)


def plan_online(rt: Runtime, spec: Spec, only_region: str | None = None,
                ) -> tuple[UpPlan, Observed]:
    """What `up` would do, from the same observation `up` makes (cluster.observe); a
    line per pinned resource says where it was found."""
    observed = survey_up(rt, spec, only_region)
    return plan_up(spec, observed), observed


def do_plan(spec_file: str, *, offline: bool = False, profile: str | None = None,
            rt: Runtime | None = None, region: str | None = None,
            out: str | None = None) -> UpPlan:
    """``region`` (--region): plan for that one of the spec's regions, or exit 2.
    ``out``: save the plan there for `up --plan` (not with ``offline``: a saved plan is
    checked against what it observed). The plan's lines (plan.spend.plan_lines) and JSON
    (``to_json``) are how it is shown."""
    from clusterkit.spec import load

    if offline and out:
        raise UsageError("--out saves a plan made from what AWS says: not with --offline",
                         "drop --offline to save the plan")
    spec = load(spec_file)
    if offline:
        return plan_offline(spec, region)
    rt = rt or Runtime.make(region=spec.region, profile=profile)
    plan, observed = plan_online(rt, spec, region)
    if out:
        savedplan.save(out, spec_file, spec, region, observed, plan)
    return plan
