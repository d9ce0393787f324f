"""`clusterkit status [NAME]`: the cluster's nodes from EC2 tags alone."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from rich import box
from rich.table import Table

from clusterkit.aws import instances
from clusterkit.cluster import kept_efs
from clusterkit.cluster.common import Runtime, per_region, resolve_target, search_regions
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
    """The live nodes (stopped ones included) of cluster ``name`` (every cluster when
    None) in ``regions``, searched in parallel."""
    def one(region: str) -> list[Node]:
        if name:
            return instances.cluster_instances(rt.session, region, name)
        return instances.tagged_instances(rt.session, region, CLUSTER_TAG)

    nodes = [n for found in per_region(regions, one).values() for n in found]
    return sorted(nodes, key=lambda n: (n.tags.get(CLUSTER_TAG, ""), n.region,
                                        n.index is None, n.index or 0))


def status(rt: Runtime, name: str | None, regions: Sequence[str],
           now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(timezone.utc)
    regions = search_regions(rt, regions)
    nodes = collect(rt, name, regions)
    rows = [node_row(n, now) for n in nodes]
    costs = [r["cost_so_far"] for r in rows]
    return {"cluster": name, "regions": list(regions), "nodes": rows,
            "hourly_usd": cluster_hourly(nodes),
            "cost_so_far_usd": round(sum(costs), 4) if costs and None not in costs else None,
            "kept_efs": kept_efs.kept(rt, name, regions) if name else []}


def say_kept_efs(rt: Runtime, result: dict[str, Any]) -> None:
    """The EFS file systems the cluster keeps (deletion_policy: retain), with size and
    $/month; they bill whether or not the cluster runs."""
    for fs in result.get("kept_efs", ()):
        rt.say(f"kept EFS {kept_efs.describe(fs)} ({kept_efs.PRICE_NOTE}); the next `up` "
               f"mounts it, `clusterkit down {result['cluster']} --delete-efs` deletes it")


# The status table's columns: the default ones fit a 100-column terminal, --wide adds
# the rest.
DEFAULT_COLUMNS = ("node", "type", "AZ", "market", "state", "launched", "$/h", "cost")
WIDE_COLUMNS = ("node", "instance", "type", "region", "AZ", "market", "state", "public",
                "private", "ssh", "launched", "$/h", "cost")


def local_time(iso: str | None) -> str:
    """An ISO 8601 timestamp in local time with the zone: ``2026-11-23 17:05 CET``."""
    if not iso:
        return "-"
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()


def usd(value: float | None, *, per_hour: bool = False) -> str:
    """Dollars: ``$1.23`` (so far), ``$0.096`` (per hour: three decimals); ``-`` unknown."""
    if value is None:
        return "?" if per_hour else "-"
    return f"${value:,.3f}" if per_hour else f"${value:,.2f}"


def node_name(row: dict[str, Any]) -> str:
    """``master``, ``worker-2``: the name ``--node`` accepts (with the index)."""
    if row["index"] is None:
        return row["instance_id"]
    return "master" if row["role"] == "master" else f"{row['role']}-{row['index']}"


def _cells(row: dict[str, Any]) -> dict[str, str]:
    return {"node": node_name(row), "instance": row["instance_id"], "type": row["type"],
            "region": row["region"], "AZ": row["az"], "market": row["market"],
            "state": row["state"], "public": row["public_ip"] or "-",
            "private": row["private_ip"] or "-", "ssh": row["ssh_address"] or "-",
            "launched": local_time(row["launch_time"]),
            "$/h": usd(row["price_per_hour"], per_hour=True), "cost": usd(row["cost_so_far"])}


def status_table(cluster: str | None, rows: Sequence[dict[str, Any]], *,
                 wide: bool = False) -> Table:
    """One cluster's nodes. Compact box, no cell is ever cut to an ellipsis (a cell that
    does not fit wraps)."""
    columns = WIDE_COLUMNS if wide else DEFAULT_COLUMNS
    regions = ", ".join(dict.fromkeys(r["region"] for r in rows))
    table = Table(title=f"cluster {cluster or '?'} ({regions})", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True,
                  title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold",
                         justify="right" if col in ("$/h", "cost") else "left")
    for row in rows:
        cells = _cells(row)
        table.add_row(*(cells[col] for col in columns))
    return table


def render(rt: Runtime, result: dict[str, Any], *, wide: bool = False) -> None:
    """One table per cluster, then the total $/h and the cost so far."""
    if not result["nodes"]:
        what = f"cluster {result['cluster']}" if result["cluster"] else "clusterkit clusters"
        rt.say(f"no {what} in {', '.join(result['regions'])}")
        say_kept_efs(rt, result)
        return
    by_cluster: dict[str | None, list[dict[str, Any]]] = {}
    for row in result["nodes"]:
        by_cluster.setdefault(row["cluster"], []).append(row)
    for cluster, rows in by_cluster.items():
        rt.console.print(status_table(cluster, rows, wide=wide))
    hourly, so_far = result["hourly_usd"], result["cost_so_far_usd"]
    per_hour = f"{usd(hourly, per_hour=True)}/h" if hourly is not None else "$/h unknown"
    rt.say(f"total: {per_hour}, so far {usd(so_far) if so_far is not None else 'unknown'}")
    say_kept_efs(rt, result)


def do_status(name: str | None, *, region: str | None = None, profile: str | None = None,
              rt: Runtime | None = None) -> dict[str, Any]:
    rt = rt or Runtime.make(region=region, profile=profile)
    cluster, regions, _ = resolve_target(name, region)
    return status(rt, cluster, regions)
