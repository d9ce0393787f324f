"""Spot-offer search: prices, zones and placement scores for every candidate
instance type in every allowed region, regions queried concurrently.

Per region: one DescribeAvailabilityZones (zone name <-> id, zone type, opt-in), one
DescribeInstanceTypeOfferings (where the types are offered), one paginated
DescribeSpotPriceHistory for all types at once (Linux/UNIX, StartTime now), and the
on-demand price from the Pricing API (snapshot fallback). Per type, once for all
regions: GetSpotPlacementScores for a single-AZ gang of ``count``. Where a Local or
Wavelength Zone the account opted in to has an offer, one DescribeVpcs and one
DescribeSubnets tell whether the default VPC has a subnet there (see catalog.zones).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from clusterkit.aws.endpoints import check_regions
from clusterkit.aws.errors import aws_call
from clusterkit.aws.pricing import (
    OnDemandPrices,
    lookup_client,
    pages,
    placement_scores,
)
from clusterkit.aws.session import client
from clusterkit.catalog import build, instances
from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.zones import ZoneType, zone_block, zone_type
from clusterkit.errors import AwsError, ClusterkitError, SandboxError, UsageError
from clusterkit.kinds import Market

PRODUCT = "Linux/UNIX"
Size = tuple[int, int]  # a type's GPUs and vCPUs
Progress = Callable[[int, int, str], None]  # (done, total, what just finished)


@dataclass(frozen=True)
class SearchResult:
    offers: list[Offer]
    region_errors: dict[str, str]  # region -> why it has no offers
    on_demand_source: str  # "pricing-api" | "snapshot"
    notes: list[str] = field(default_factory=list)  # e.g. placement scores unavailable
    api_calls: dict[str, int] = field(default_factory=dict)  # operation -> calls made
    count: int = 1


class _Calls:
    """Counts API calls by operation name across every client of one search."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, operation: str) -> None:
        with self._lock:
            self.counts[operation] += 1

    def watch(self, made: Any) -> Any:
        made.meta.events.register("before-call", lambda model, **_: self.add(model.name))
        return made


@dataclass
class _Zones:
    name_to_id: dict[str, str]
    offered: set[tuple[str, str]]  # (type, zone name)
    spot: dict[tuple[str, str], float]  # (type, zone name) -> latest $/h
    kinds: dict[str, ZoneType] = field(default_factory=dict)  # zone name -> kind
    blocked: dict[str, str] = field(default_factory=dict)  # zone name -> why unusable


def _latest_spot(ec2: Any, types: Sequence[str]) -> dict[tuple[str, str], float]:
    now = datetime.now(timezone.utc)
    latest: dict[tuple[str, str], tuple[Any, float]] = {}
    for item in pages(ec2.describe_spot_price_history, "SpotPriceHistory",
                      InstanceTypes=list(types), ProductDescriptions=[PRODUCT],
                      StartTime=now, MaxResults=1000):
        key = (item["InstanceType"], item["AvailabilityZone"])
        stamp = item.get("Timestamp") or now
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, float(item["SpotPrice"]))
    return {k: v[1] for k, v in latest.items()}


def _subnet_zones(ec2: Any, region: str, names: Sequence[str]) -> set[str]:
    """Which of the zones ``names`` have a subnet in the region's default VPC."""
    with aws_call("DescribeVpcs", region):
        vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        return set()
    with aws_call("DescribeSubnets", region):
        subnets = ec2.describe_subnets(Filters=[
            {"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]},
            {"Name": "availability-zone", "Values": list(names)}])["Subnets"]
    return {s["AvailabilityZone"] for s in subnets}


def _special_zones(ec2: Any, region: str, found: _Zones, azs: Sequence[dict[str, Any]]) -> None:
    """Kind of every zone; Local/Wavelength Zones with an offer are blocked unless opted
    in and holding a subnet of the default VPC (checked only when one is opted in)."""
    found.kinds = {z["ZoneName"]: zone_type(z["ZoneName"], z.get("ZoneType")) for z in azs}
    with_offer = {zone for _, zone in found.offered | set(found.spot)}
    special = {z["ZoneName"]: z.get("OptInStatus") == "opted-in" for z in azs
               if found.kinds[z["ZoneName"]] is not ZoneType.AVAILABILITY_ZONE
               and z["ZoneName"] in with_offer}
    opted = sorted(name for name, ok in special.items() if ok)
    subnets = _subnet_zones(ec2, region, opted) if opted else set()
    found.blocked = {name: why for name, ok in special.items()
                     if (why := zone_block(found.kinds[name], opted_in=ok,
                                           has_subnet=name in subnets))}


def _zones(ec2: Any, region: str, types: Sequence[str]) -> _Zones:
    with aws_call("DescribeAvailabilityZones", region):
        azs = ec2.describe_availability_zones(AllAvailabilityZones=True)
    with aws_call("DescribeInstanceTypeOfferings", region):
        offered = list(pages(ec2.describe_instance_type_offerings, "InstanceTypeOfferings",
                             LocationType="availability-zone",
                             Filters=[{"Name": "instance-type", "Values": list(types)}]))
    with aws_call("DescribeSpotPriceHistory", region):
        spot = _latest_spot(ec2, types)
    found = _Zones({z["ZoneName"]: z["ZoneId"] for z in azs["AvailabilityZones"]},
                   {(o["InstanceType"], o["Location"]) for o in offered}, spot)
    _special_zones(ec2, region, found, azs["AvailabilityZones"])
    return found


def _region_offers(ec2: Any, region: str, types: Sequence[str], sizes: dict[str, Size],
                   on_demand: OnDemandPrices) -> list[Offer]:
    zones = _zones(ec2, region, types)
    offers: list[Offer] = []
    for itype in types:
        names = sorted({z for t, z in zones.offered | set(zones.spot) if t == itype
                        and z in zones.name_to_id})
        if not names:
            continue
        od = on_demand.price(itype, region)
        gpus, vcpus = sizes[itype]
        for zone in names:
            zid = zones.name_to_id[zone]
            kind, blocked = zones.kinds[zone], zones.blocked.get(zone, "")
            offers.append(Offer(itype, region, zone, zid, Market.SPOT, zones.spot.get((itype, zone)),
                                od, gpus, zone_type=kind, blocked=blocked, vcpus=vcpus))
            offers.append(Offer(itype, region, zone, zid, Market.ON_DEMAND, od, od, gpus,
                                zone_type=kind, blocked=blocked, vcpus=vcpus))
    return offers


def _sizes(session: Any, region: str, types: Sequence[str], calls: _Calls) -> dict[str, Size]:
    """GPUs and vCPUs per type (what offers are ranked by) from the catalog;
    DescribeInstanceTypes for types it lacks (0, 0: unknown)."""
    sizes = {t: (known.gpu_count, known.vcpus) for t in types
             if (known := instances.lookup(t)) is not None}
    unknown = [t for t in types if t not in sizes]
    if unknown:
        ec2 = calls.watch(client(session, "ec2", region))
        with aws_call("DescribeInstanceTypes", ",".join(unknown)):
            found = ec2.describe_instance_types(InstanceTypes=unknown)
        for item in found.get("InstanceTypes", []):
            entry = build.entry_from_describe(item)
            sizes[entry["name"]] = (entry["gpu"]["count"] if entry["gpu"] else 0,
                                    entry["vcpus"])
    return {t: sizes.get(t, (0, 0)) for t in types}


def _check_args(instance_types: Sequence[str], regions: Sequence[str], count: int) -> None:
    if not instance_types:
        raise UsageError("no instance types to search", "pass --instance-types or a spec")
    if not regions:
        raise UsageError("no regions to search", "pass --regions, --region or a spec")
    if count < 1:
        raise UsageError(f"--count must be at least 1, got {count}")
    check_regions(regions)


class _Collect:
    """Gathers the results of the region and placement-score jobs as they finish."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.done, self.progress = total, 0, progress
        self.offers: list[Offer] = []
        self.errors: dict[str, str] = {}
        self.score_errors: dict[str, list[str]] = {}  # message -> types
        self.scores: dict[tuple[str, str, str], int] = {}

    def take(self, kind: str, name: str, job: Any) -> None:
        self.done += 1
        try:
            result = job.result()
        except SandboxError:
            raise  # not one region's failure: no region can answer
        except ClusterkitError as exc:
            if kind == "region":
                self.errors[name] = short(exc.message)
            else:
                self.score_errors.setdefault(short(exc.message), []).append(name)
            result = None
        if result is not None and kind == "region":
            self.offers.extend(result)
        elif result is not None:
            self.scores.update({(name, r, z): s for (r, z), s in result.items()})
        if self.progress:
            self.progress(self.done, self.total,
                          f"{kind} {name}" + (" failed" if result is None else ""))

    def notes(self, on_demand: OnDemandPrices) -> list[str]:
        out = [f"placement scores unknown for {', '.join(sorted(types))}: {why}"
               for why, types in self.score_errors.items()]
        if on_demand.used_snapshot and on_demand.api_error:
            out.append(f"on-demand prices from the shipped snapshot: "
                       f"{short(on_demand.api_error)}")
        return out


def search_offers(session: Any, *, instance_types: Sequence[str], regions: Sequence[str],
                  count: int, progress: Progress | None = None,
                  use_pricing_api: bool = True) -> SearchResult:
    """Every spot and on-demand offer (one per type per AZ per market) in ``regions``."""
    types, regions = list(dict.fromkeys(instance_types)), list(dict.fromkeys(regions))
    _check_args(types, regions, count)
    calls = _Calls()
    on_demand = OnDemandPrices(session, use_api=use_pricing_api)
    on_demand.count_call = calls.add
    sizes = _sizes(session, regions[0], types, calls)
    collect = _Collect(len(regions) + len(types), progress)
    if progress:
        progress(0, collect.total, f"{len(regions)} region(s), {len(types)} type(s)")
    # clients are made here, in one thread: boto3 sessions are not thread-safe
    region_ec2 = {r: calls.watch(client(session, "ec2", r)) for r in regions}
    score_ec2 = calls.watch(lookup_client(session, regions[0]))
    with ThreadPoolExecutor(max_workers=min(16, collect.total)) as pool:
        jobs = {pool.submit(_region_offers, region_ec2[r], r, types, sizes, on_demand):
                ("region", r) for r in regions}
        jobs.update({pool.submit(placement_scores, score_ec2, t, regions, count):
                     ("scores", t) for t in types})
        for job in as_completed(jobs):
            collect.take(*jobs[job], job)
    offers = [_with_score(o, collect.scores) for o in collect.offers]
    return SearchResult(offers, collect.errors, on_demand.source, collect.notes(on_demand),
                        dict(calls.counts), count)


def every_region_failed(result: SearchResult) -> None:
    """AwsError (exit 1) when no region answered: each region's failed API and why."""
    if result.offers or not result.region_errors:
        return
    lines = [f"  {region}: {why}" for region, why in sorted(result.region_errors.items())]
    raise AwsError(f"the offer search failed in every region ({len(lines)}):\n"
                   + "\n".join(lines),
                   "check the credentials, their EC2 read permissions (Describe*), and "
                   "AWS_ENDPOINT_URL; run with --debug for the AWS responses")


def short(message: str, limit: int = 140) -> str:
    """One line of at most ``limit`` characters (AWS error bodies can be HTML pages)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _with_score(offer: Offer, scores: dict[tuple[str, str, str], int]) -> Offer:
    if offer.market != Market.SPOT:
        return offer
    score = scores.get((offer.instance_type, offer.region, offer.az_id or ""))
    if score is None:
        return offer
    return replace(offer, placement_score=score)
