"""`clusterkit spot`: merge the options over the spec, search every region, rank."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws.offers import Progress, every_region_failed, search_offers
from clusterkit.catalog.query import merge_query
from clusterkit.catalog.report import SpotReport, build_report
from clusterkit.cluster.runtime import Runtime
from clusterkit.spec import load


def do_spot(spec_file: str | None, *, instance_types: Sequence[str] = (),
            regions: Sequence[str] = (), count: int | None = None, region: str | None = None,
            profile: str | None = None, progress: Progress | None = None,
            rt: Runtime | None = None) -> SpotReport:
    """Search, then rank; a spec file (if given) supplies what the options leave out."""
    session = (rt or Runtime.make(region=region, profile=profile)).session
    query = merge_query(load(spec_file) if spec_file else None,
                        instance_types=instance_types, regions=regions, count=count,
                        default_region=region or session.region_name)
    result = search_offers(session, instance_types=query.instance_types,
                           regions=query.regions, count=query.count, progress=progress)
    every_region_failed(result)
    return build_report(result.offers, count=query.count, instance_types=query.instance_types,
                        regions=query.regions, region_errors=result.region_errors,
                        on_demand_source=result.on_demand_source, notes=result.notes,
                        max_price=query.max_price)
