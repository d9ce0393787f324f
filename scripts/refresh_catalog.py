"""Rebuild the shipped catalog data from AWS (needs credentials; not run in CI).

    python scripts/refresh_catalog.py [--region us-east-1] [--profile P]
        [--regions r1,r2,...] [--types t1,t2,...] [--dry-run]

- clusterkit/catalog/data/instances.json from DescribeInstanceTypes (entries AWS no
  longer returns are kept as they were);
- clusterkit/catalog/data/aws-prices.csv from DescribeSpotPriceHistory (one row per
  zone id) and the Pricing API (on-demand), through clusterkit.aws.offers.search_offers.
  If the Pricing API cannot be reached, the old on-demand prices are kept and it says so.
Default types and regions: those already in the shipped files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clusterkit.aws.offers import search_offers
from clusterkit.aws.pricing import describe_instance_types
from clusterkit.aws.session import make_session
from clusterkit.catalog import build, instances, prices

DATA = Path(instances.__file__).parent / "data"


def _instances(session, region: str, types: list[str]) -> dict:
    items = describe_instance_types(session, region, types)
    old = json.loads((DATA / "instances.json").read_text())["types"]
    return build.build_catalog(items, source=f"DescribeInstanceTypes in {region} "
                               "(scripts/refresh_catalog.py)", extra=old)


def _price_rows(result, catalog: dict) -> list[dict[str, str]]:
    facts = {e["name"]: e for e in catalog["types"]}
    rows = []
    for offer in sorted((o for o in result.offers if o.market == "spot"),
                        key=lambda o: (o.instance_type, o.region, o.az_id or "")):
        entry = facts.get(offer.instance_type, {})
        gpu = entry.get("gpu") or {}
        rows.append({
            "InstanceType": offer.instance_type, "AcceleratorName": gpu.get("model", ""),
            "AcceleratorCount": f"{gpu['count']:.1f}" if gpu else "",
            "vCPUs": f"{entry.get('vcpus', 0):.1f}", "MemoryGiB": f"{entry.get('memory_gib', 0)}",
            "GpuInfo": "", "Price": "" if offer.on_demand_price is None
            else f"{offer.on_demand_price:g}",
            "SpotPrice": "" if offer.price is None else f"{offer.price:.6f}",
            "Region": offer.region, "AvailabilityZone": offer.az_id or "",
            "Arch": entry.get("arch", "x86_64")})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description="Rebuild clusterkit/catalog/data from AWS.")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--profile")
    parser.add_argument("--regions", help="default: the regions of the shipped snapshot")
    parser.add_argument("--types", help="default: every type of the shipped catalog")
    parser.add_argument("--dry-run", action="store_true", help="print counts, write nothing")
    args = parser.parse_args()
    session = make_session(args.region, args.profile)
    types = args.types.split(",") if args.types else [t.name for t in instances.all_types()]
    regions = args.regions.split(",") if args.regions else sorted(
        {r.region for r in prices.snapshot_rows()})
    catalog = _instances(session, args.region, types)
    result = search_offers(session, instance_types=types, regions=regions, count=1)
    for region, why in sorted(result.region_errors.items()):
        print(f"warning: {region}: {why}", file=sys.stderr)
    if result.on_demand_source == "snapshot":
        print("warning: Pricing API unavailable; on-demand prices kept from the old snapshot",
              file=sys.stderr)
    rows = _price_rows(result, catalog)
    print(f"{len(catalog['types'])} instance types, {len(rows)} price rows")
    if not args.dry_run:
        (DATA / "instances.json").write_text(json.dumps(catalog, indent=1) + "\n")
        (DATA / "aws-prices.csv").write_text(prices.format_price_csv(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
