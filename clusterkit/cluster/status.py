"""`clusterkit status [NAME]`: the cluster's nodes from EC2 tags alone."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from clusterkit.aws import instances
from clusterkit.cluster import kept_efs
from clusterkit.cluster.runtime import Runtime
from clusterkit.cluster.target import per_region, resolve_target, search_regions
from clusterkit.cluster.up import safe_address
from clusterkit.kinds import InstanceState, Market, Role
from clusterkit.plan.cost import cluster_hourly, node_cost
from clusterkit.plan.nodes import CLUSTER_TAG, Node, node_order


@dataclass(frozen=True)
class StatusRow:
    """One node as `status` lists it (the JSON keys are the field names)."""

    cluster: str | None
    index: int | None
    role: Role
    instance_id: str
    type: str
    region: str
    az: str
    market: Market
    state: str
    public_ip: str | None
    private_ip: str | None
    ssh_address: str | None
    launch_time: str | None
    price_per_hour: float | None
    cost_so_far: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StatusResult:
    """The nodes of one cluster (``cluster``) or of every cluster (None) in ``regions``,
    the total $/h and cost so far, and the EFS file systems the cluster keeps."""

    cluster: str | None
    regions: list[str]
    nodes: list[StatusRow]
    hourly_usd: float | None
    cost_so_far_usd: float | None
    kept_efs: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "regions": self.regions,
                "nodes": [r.to_json() for r in self.nodes], "hourly_usd": self.hourly_usd,
                "cost_so_far_usd": self.cost_so_far_usd, "kept_efs": self.kept_efs}


def node_row(node: Node, now: datetime) -> StatusRow:
    return StatusRow(
        cluster=node.tags.get(CLUSTER_TAG), index=node.index, role=node.role,
        instance_id=node.instance_id, type=node.instance_type, region=node.region,
        az=node.az, market=node.market, state=node.state,
        public_ip=node.public_ip, private_ip=node.private_ip,
        ssh_address=safe_address(node) if node.state == InstanceState.RUNNING else None,
        launch_time=node.launch_time, price_per_hour=node.price,
        cost_so_far=node_cost(node, now))


def collect(rt: Runtime, name: str | None, regions: Sequence[str]) -> list[Node]:
    """The live nodes (stopped ones included) of cluster ``name`` (every cluster when
    None) in ``regions``, searched in parallel."""
    def one(region: str) -> list[Node]:
        if name:
            return instances.cluster_instances(rt.session, region, name)
        return instances.tagged_instances(rt.session, region, CLUSTER_TAG)

    nodes = [n for found in per_region(regions, one).values() for n in found]
    return sorted(nodes, key=lambda n: (n.tags.get(CLUSTER_TAG, ""), n.region,
                                        *node_order(n)))


def status(rt: Runtime, name: str | None, regions: Sequence[str],
           now: datetime | None = None) -> StatusResult:
    now = now or datetime.now(timezone.utc)
    regions = search_regions(rt, regions)
    nodes = collect(rt, name, regions)
    rows = [node_row(n, now) for n in nodes]
    known = [r.cost_so_far for r in rows if r.cost_so_far is not None]
    so_far = round(sum(known), 4) if rows and len(known) == len(rows) else None
    return StatusResult(name, list(regions), rows, cluster_hourly(nodes), so_far,
                        kept_efs.kept(rt, name, regions) if name else [])


def do_status(name: str | None, *, region: str | None = None, profile: str | None = None,
              rt: Runtime | None = None) -> StatusResult:
    rt = rt or Runtime.make(region=region, profile=profile)
    cluster, regions, _ = resolve_target(name, region)
    return status(rt, cluster, regions)
