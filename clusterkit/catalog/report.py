"""The `clusterkit spot` result as table rows and JSON. PURE (builds a rich Table
object but prints nothing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from clusterkit.catalog.ranking import Offer, RankedOffer, rank_offers


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
    spot = [o for o in offers if o.market == "spot"]
    ranked = rank_offers(spot, max_price=max_price, instance_types=instance_types,
                         regions=regions)
    return SpotReport(ranked, count, list(regions), list(instance_types), dict(region_errors),
                      on_demand_source, list(notes), max_price)


def _money(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def offer_json(r: RankedOffer, count: int) -> dict[str, Any]:
    o = r.offer
    return {
        "rank": r.rank, "instance_type": o.instance_type, "region": o.region, "az": o.az,
        "az_id": o.az_id, "spot_price": o.price, "on_demand_price": o.on_demand_price,
        "discount_pct": None if o.discount is None else round(100 * o.discount, 1),
        "gpus": o.gpus,
        "per_gpu_hour": None if o.per_gpu_hour is None else round(o.per_gpu_hour, 6),
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


def report_table(report: SpotReport) -> Table:
    source = "Pricing API" if report.on_demand_source == "pricing-api" else "shipped snapshot"
    table = Table(title=f"spot offers for {report.count} node(s), single AZ "
                        f"(on-demand prices: {source})")
    for name, justify, wrap in (
            ("rank", "right", False), ("type", "left", False), ("region", "left", False),
            ("AZ", "left", False), ("spot $/h", "right", False),
            ("on-demand $/h", "right", False), ("discount", "right", False),
            ("$/GPU-h", "right", False), ("placement score", "right", True),
            ("note", "left", True)):
        table.add_column(name, justify=justify, no_wrap=not wrap)  # type: ignore[arg-type]
    for r in report.ranked:
        o = r.offer
        table.add_row(
            "-" if r.rank is None else str(r.rank), o.instance_type, o.region,
            f"{o.az} ({o.az_id})", _money(o.price), _money(o.on_demand_price),
            "-" if o.discount is None else f"{100 * o.discount:.0f}%",
            _money(o.per_gpu_hour), "?" if o.placement_score is None else str(o.placement_score),
            r.note, style="dim" if r.rank is None else ("bold green" if r.rank == 1 else None))
    for region, why in sorted(report.region_errors.items()):
        table.add_row("-", "(all)", region, "-", "-", "-", "-", "-", "-",
                      f"region failed: {why}", style="red")
    return table


def report_footer(report: SpotReport) -> list[str]:
    """Lines printed under the table (region errors are rows of the table itself)."""
    lines = list(report.notes)
    if not report.ranked and not report.region_errors:
        lines.append("no offers: the instance types are not offered in these regions")
    return lines
