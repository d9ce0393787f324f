"""What `clusterkit spot` searches: command-line options merged over a spec. PURE."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusterkit.errors import UsageError
from clusterkit.spec.model import Spec


@dataclass(frozen=True)
class SpotQuery:
    instance_types: list[str]
    regions: list[str]
    count: int
    max_price: float | None = None


def merge_query(spec: Spec | None, *, instance_types: Sequence[str] = (),
                regions: Sequence[str] = (), count: int | None = None,
                default_region: str | None = None) -> SpotQuery:
    """Options replace the spec's values; without a spec, --instance-types is needed."""
    types = list(instance_types) or (list(spec.nodes.instance_types) if spec else [])
    if not types:
        raise UsageError("no instance types to search",
                         "give a spec file or --instance-types p4d.24xlarge,p5.48xlarge")
    where = list(regions) or (list(spec.regions or (spec.region,)) if spec else []) \
        or ([default_region] if default_region else [])
    if not where:
        raise UsageError("no region to search", "pass --regions us-east-1,us-west-2 or --region")
    nodes = count if count is not None else (spec.nodes.count if spec else 1)
    if nodes < 1:
        raise UsageError(f"--count must be at least 1, got {nodes}")
    return SpotQuery(types, where, nodes, spec.nodes.max_price if spec else None)
