"""Offline price snapshot: on-demand $/h per region, spot $/h per AZ id. PURE:
reads only ``catalog/data/aws-prices.csv`` (see ``data/SOURCE.md``)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from clusterkit.catalog.instances import read_data_text

PRICE_FILE = "aws-prices.csv"
SNAPSHOT_SOURCE = ("skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv @ "
                   "00148f2af3672e2229b4f7bf8157d5a3f36e3c35")
CSV_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
               "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone", "Arch")


@dataclass(frozen=True)
class PriceRow:
    instance_type: str
    region: str
    az_id: str  # zone id, e.g. "use1-az4"
    on_demand: float | None  # USD/h, same for every zone of the region
    spot: float | None  # USD/h in this zone


def _price(cell: str | None) -> float | None:
    cell = (cell or "").strip()
    return float(cell) if cell else None


def parse_price_csv(text: str) -> list[PriceRow]:
    """Rows of a price CSV in the snapshot's column layout."""
    reader = csv.DictReader(io.StringIO(text))
    return [PriceRow(r["InstanceType"], r["Region"], r["AvailabilityZone"],
                     _price(r.get("Price")), _price(r.get("SpotPrice"))) for r in reader]


def format_price_csv(rows: Iterable[dict[str, str]]) -> str:
    """Write rows (dicts keyed by CSV_COLUMNS) back in the snapshot layout."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in CSV_COLUMNS})
    return out.getvalue()


@lru_cache(maxsize=1)
def snapshot_rows() -> tuple[PriceRow, ...]:
    return tuple(parse_price_csv(read_data_text(PRICE_FILE)))


@lru_cache(maxsize=1)
def _on_demand_index() -> dict[tuple[str, str], float]:
    return {(r.instance_type, r.region): r.on_demand for r in snapshot_rows()
            if r.on_demand is not None}


def on_demand_price(instance_type: str, region: str) -> float | None:
    """On-demand Linux USD/h from the shipped snapshot, or None if unknown."""
    return _on_demand_index().get((instance_type, region))


def spot_snapshot(instance_type: str, region: str) -> dict[str, float]:
    """Spot USD/h per zone id of ``region`` from the shipped snapshot."""
    return {r.az_id: r.spot for r in snapshot_rows()
            if r.instance_type == instance_type and r.region == region and r.spot is not None}


def regions_with(instance_type: str) -> list[str]:
    """Regions where the snapshot has any price for ``instance_type``."""
    return sorted({r.region for r in snapshot_rows() if r.instance_type == instance_type})
