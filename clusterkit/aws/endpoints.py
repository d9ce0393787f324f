"""Region names clusterkit accepts: those in botocore's own endpoint data (no call).

An unknown name is refused before any request: against a made-up region botocore would
build a host such as ``ec2.us-east-9.amazonaws.com`` and the user would see a DNS error,
or, through a proxy or ``AWS_ENDPOINT_URL``, an HTML page.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from clusterkit.catalog import regions as regions_catalog
from clusterkit.errors import UsageError


@lru_cache(maxsize=1)
def known_regions() -> tuple[str, ...]:
    """Every EC2 region of every partition botocore knows (aws, aws-cn, aws-us-gov, ...)."""
    from botocore.loaders import create_loader  # lazily: ~0.1 s, as in aws.session
    from botocore.regions import EndpointResolver

    resolver = EndpointResolver(create_loader().load_data("endpoints"))
    names: set[str] = set()
    for partition in resolver.get_available_partitions():
        names.update(resolver.get_available_endpoints("ec2", partition_name=partition))
    return tuple(sorted(names))


def check_regions(regions: Iterable[str], where: str = "") -> None:
    """UsageError (exit 2) naming the first unknown region, with a did-you-mean: the
    same words as the spec's and --region's check (catalog.regions)."""
    known = known_regions()
    for region in regions:
        if region not in known:
            source = f"{where}: " if where else ""
            raise UsageError(f"{source}{region!r} is not an AWS region",
                             regions_catalog.suggestion(region))
