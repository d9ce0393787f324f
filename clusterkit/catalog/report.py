"""The `clusterkit spot` result: ranked offers, its JSON and the lines under the table.
PURE (the table itself is drawn by cli.spot)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.catalog.ranking import Offer, RankedOffer, rank_offers
from clusterkit.kinds import Market


@dataclass(frozen=True)
class SpotReport:
    ranked: list[RankedOffer]  # spot offers in table order
    count: int
    regions: list[str]
    instance_types: list[str]
    region_errors: dict[str, str]
    on_demand_source: str
    notes: list[str] = field(default_factory=list)
    max_price: float | None = None

    @property
    def best(self) -> RankedOffer | None:
        return self.ranked[0] if self.ranked and self.ranked[0].rank == 1 else None


def build_report(offers: Sequence[Offer], *, count: int, instance_types: Sequence[str],
                 regions: Sequence[str], region_errors: Mapping[str, str],
                 on_demand_source: str, notes: Sequence[str] = (),
                 max_price: float | None = None) -> SpotReport:
    """Rank the spot offers (the table lists spot offers; on-demand is a column)."""
    spot = [o for o in offers if o.market == Market.SPOT]
    ranked = rank_offers(spot, max_price=max_price, instance_types=instance_types,
                         regions=regions)
    return SpotReport(ranked, count, list(regions), list(instance_types), dict(region_errors),
                      on_demand_source, list(notes), max_price)


def offer_json(r: RankedOffer, count: int) -> dict[str, Any]:
    o = r.offer
    return {
        "rank": r.rank, "instance_type": o.instance_type, "region": o.region, "az": o.az,
        "az_id": o.az_id, "spot_price": o.price, "on_demand_price": o.on_demand_price,
        "discount_pct": None if o.discount is None else round(100 * o.discount, 1),
        "gpus": o.gpus,
        "per_gpu_hour": None if o.per_gpu_hour is None else round(o.per_gpu_hour, 6),
        "vcpus": o.vcpus,
        "per_vcpu_hour": None if o.per_vcpu_hour is None else round(o.per_vcpu_hour, 6),
        "cluster_per_hour": None if o.price is None else round(o.price * count, 6),
        "placement_score": o.placement_score, "note": r.note,
    }


def report_json(report: SpotReport) -> dict[str, Any]:
    return {
        "count": report.count, "regions": report.regions,
        "instance_types": report.instance_types, "max_price": report.max_price,
        "on_demand_source": report.on_demand_source,
        "offers": [offer_json(r, report.count) for r in report.ranked],
        "region_errors": report.region_errors, "notes": report.notes,
    }


def report_footer(report: SpotReport) -> list[str]:
    """Lines printed under the table (region errors are rows of the table itself)."""
    lines = list(report.notes)
    if not report.ranked and not report.region_errors:
        lines.append("no offers: the instance types are not offered in these regions")
    return lines
