"""Serve recorded real spot prices from the in-process moto EC2 endpoint.

moto answers DescribeSpotPriceHistory with a constant placeholder price. ``install()``
replaces that one response method (process-wide, so a ThreadedMotoServer in this
process serves it) with one that answers from a recorded price CSV (default: the
snapshot shipped in ``clusterkit/catalog/data/``) in the shape AWS uses: one entry
per (type, zone) with ``ProductDescription`` "Linux/UNIX", the price as a string
with six decimals, a timestamp, zone *names* mapped from the CSV's zone ids through
moto's own zone table, the ``InstanceTypes`` / ``ProductDescriptions`` /
``AvailabilityZone`` parameters, the ``availability-zone`` / ``instance-type`` /
``product-description`` filters, and ``MaxResults`` / ``NextToken`` paging.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from clusterkit.catalog import prices

PRODUCT = "Linux/UNIX"
RECORDED_AT = "2025-01-01T00:00:00.000Z"  # the snapshot is not dated; a fixed, past time
DEFAULT_PAGE = 1000

_lock = threading.Lock()
_state: dict[str, Any] = {"original": None, "by_region": {}}


def _load(csv_path: str | Path | None) -> dict[str, list[prices.PriceRow]]:
    if csv_path is None:
        rows = list(prices.snapshot_rows())
    else:
        rows = prices.parse_price_csv(Path(csv_path).read_text("utf-8"))
    by_region: dict[str, list[prices.PriceRow]] = defaultdict(list)
    for row in rows:
        if row.spot is not None:
            by_region[row.region].append(row)
    return dict(by_region)


def _history(response: Any) -> list[dict[str, str]]:
    """Every recorded price of the response's region that the request selects."""
    zones = {z.zone_id: z.name for z in response.ec2_backend.describe_availability_zones()}
    types = set(response._get_param("InstanceTypes", []) or [])
    products = set(response._get_param("ProductDescriptions", []) or [])
    only_zone = response._get_param("AvailabilityZone")
    filters = response._filters_from_querystring()
    out = []
    for row in _state["by_region"].get(response.region, []):
        zone = zones.get(row.az_id)
        if zone is None:  # a zone id moto's table does not have
            continue
        entry = {"AvailabilityZone": zone, "InstanceType": row.instance_type,
                 "ProductDescription": PRODUCT, "SpotPrice": f"{row.spot:.6f}",
                 "Timestamp": RECORDED_AT}
        if types and row.instance_type not in types:
            continue
        if products and PRODUCT not in products:
            continue
        if only_zone and zone != only_zone:
            continue
        if not _matches(entry, filters):
            continue
        out.append(entry)
    out.sort(key=lambda e: (e["InstanceType"], e["AvailabilityZone"]))
    return out


def _matches(entry: dict[str, str], filters: dict[str, list[str]]) -> bool:
    keys = {"availability-zone": "AvailabilityZone", "instance-type": "InstanceType",
            "product-description": "ProductDescription", "spot-price": "SpotPrice"}
    return all(entry.get(keys.get(name, "")) in values
               for name, values in filters.items() if name in keys)


def _describe_spot_price_history(self: Any) -> Any:
    from moto.core.responses import ActionResult

    history = _history(self)
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxResults") or DEFAULT_PAGE)
    page = history[start:start + size]
    result: dict[str, Any] = {"SpotPriceHistory": page}
    if start + size < len(history):
        result["NextToken"] = str(start + size)
    return ActionResult(result)


def install(csv_path: str | Path | None = None) -> int:
    """Patch moto so DescribeSpotPriceHistory serves recorded prices. Idempotent; a
    second call replaces the price data. Returns the number of prices loaded."""
    from moto.ec2.responses.spot_instances import SpotInstances

    with _lock:
        _state["by_region"] = _load(csv_path)
        if _state["original"] is None:
            _state["original"] = SpotInstances.describe_spot_price_history
            SpotInstances.describe_spot_price_history = _describe_spot_price_history
    return sum(len(v) for v in _state["by_region"].values())


def uninstall() -> None:
    """Put moto's own placeholder back."""
    from moto.ec2.responses.spot_instances import SpotInstances

    with _lock:
        if _state["original"] is not None:
            SpotInstances.describe_spot_price_history = _state["original"]
            _state["original"] = None
        _state["by_region"] = {}


def installed() -> bool:
    return _state["original"] is not None
