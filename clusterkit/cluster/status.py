"""`clusterkit status [NAME]`: the cluster's nodes from EC2 tags alone."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from rich.table import Table

from clusterkit.aws import instances
from clusterkit.cluster.common import Runtime, resolve_target
from clusterkit.cluster.up import safe_address
from clusterkit.plan.cost import cluster_hourly, node_cost
from clusterkit.plan.nodes import CLUSTER_TAG, Node


def node_row(node: Node, now: datetime) -> dict[str, Any]:
    return {
        "cluster": node.tags.get(CLUSTER_TAG), "index": node.index, "role": node.role,
        "instance_id": node.instance_id, "type": node.instance_type, "region": node.region,
        "az": node.az, "market": node.market, "state": node.state,
        "public_ip": node.public_ip, "private_ip": node.private_ip,
        "ssh_address": safe_address(node) if node.state == "running" else None,
        "launch_time": node.launch_time, "price_per_hour": node.price,
        "cost_so_far": node_cost(node, now),
    }


def collect(rt: Runtime, name: str | None, regions: Sequence[str]) -> list[Node]:
    nodes: list[Node] = []
    for region in regions:
        if name:
            nodes += instances.cluster_instances(rt.session, region, name)
        else:
            nodes += instances.tagged_instances(rt.session, region, CLUSTER_TAG)
    return sorted(nodes, key=lambda n: (n.tags.get(CLUSTER_TAG, ""), n.region,
                                        n.index is None, n.index or 0))


def status(rt: Runtime, name: str | None, regions: Sequence[str],
           now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(timezone.utc)
    nodes = collect(rt, name, regions)
    rows = [node_row(n, now) for n in nodes]
    costs = [r["cost_so_far"] for r in rows]
    return {"cluster": name, "regions": list(regions), "nodes": rows,
            "hourly_usd": cluster_hourly(nodes),
            "cost_so_far_usd": round(sum(costs), 4) if costs and None not in costs else None}


def render(rt: Runtime, result: dict[str, Any]) -> None:
    if not result["nodes"]:
        what = f"cluster {result['cluster']}" if result["cluster"] else "clusterkit clusters"
        rt.say(f"no {what} in {', '.join(result['regions'])}")
        return
    table = Table(title=f"cluster {result['cluster']}" if result["cluster"] else "clusters")
    for col in ("cluster", "#", "role", "instance", "type", "AZ", "market", "state",
                "public", "private", "ssh", "launched", "$/h", "cost"):
        table.add_column(col)
    for r in result["nodes"]:
        price = f"{r['price_per_hour']:.4f}" if r["price_per_hour"] is not None else "?"
        cost = f"{r['cost_so_far']:.2f}" if r["cost_so_far"] is not None else "-"
        table.add_row(r["cluster"] or "", str(r["index"]), r["role"], r["instance_id"], r["type"],
                      r["az"], r["market"], r["state"], r["public_ip"] or "-",
                      r["private_ip"] or "-", r["ssh_address"] or "-",
                      r["launch_time"][:19], price, cost)
    rt.console.print(table)
    hourly = result["hourly_usd"]
    so_far = result["cost_so_far_usd"]
    per_hour = f"${hourly:.4f}/h" if hourly is not None else "$/h unknown"
    spent = f"${so_far:.2f}" if so_far is not None else "unknown"
    rt.say(f"total: {per_hour}, so far {spent}")


def do_status(name: str | None, *, region: str | None = None, profile: str | None = None,
              rt: Runtime | None = None) -> dict[str, Any]:
    rt = rt or Runtime.make(region=region, profile=profile)
    cluster, regions, _ = resolve_target(name, region or rt.session.region_name)
    return status(rt, cluster, regions)
