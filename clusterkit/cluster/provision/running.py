"""After `up` failed or was interrupted: which instances still run, what they cost per
hour, and the exact command that removes them (Safety rules, DESIGN.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterkit.aws import instances
from clusterkit.catalog.prices import on_demand_price
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.kinds import InstanceState
from clusterkit.plan.nodes import Node, node_order

# States that still hold the instance (and, but for "stopped", bill for it).
STILL_THERE = (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.STOPPING,
               InstanceState.STOPPED)


@dataclass
class Trail:
    """What one `up` has touched so far: the regions it may have created things in and
    the nodes it knows of (used when the tag search itself fails)."""

    cluster: str
    regions: list[str] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)

    def touch(self, region: str | None, nodes: Sequence[Node] = ()) -> None:
        if region and region not in self.regions:
            self.regions.append(region)
        self.nodes.update((n.instance_id, n) for n in nodes)


def down_command(cluster: str, region: str) -> str:
    return f"clusterkit down {cluster} --region {region}"


def _price(node: Node) -> tuple[float | None, str]:
    """The node's $/h: recorded at launch, else the on-demand price (an upper bound)."""
    if node.price is not None:
        return node.price, f"${node.price:.4f}/h"
    od = on_demand_price(node.instance_type, node.region)
    return od, "$/h unknown" if od is None else f"at most ${od:.4f}/h"


def running_lines(cluster: str, nodes: Sequence[Node], regions: Sequence[str]) -> list[str]:
    """PURE. The lines naming what still runs and the command that removes it."""
    there = sorted((n for n in nodes if n.state in STILL_THERE),
                   key=lambda n: (n.region, *node_order(n)))
    if not there:
        where = regions[0] if regions else "its region"
        return [f"no instance of cluster {cluster} is running",
                f"remove what `up` created so far (stack, key pair): "
                f"{down_command(cluster, where)}; or run `clusterkit up` again to resume"]
    prices = [_price(n) for n in there]
    known = [p for p, _ in prices if p is not None]
    total = f"${sum(known):.4f}/h" + ("" if len(known) == len(prices) else " + unknown")
    lines = [f"still running: {len(there)} instance(s) of cluster {cluster}, {total}:"]
    for node, (_, text) in zip(there, prices, strict=True):
        lines.append(f"  {node.instance_id} {node.role} {node.instance_type} {node.market} "
                     f"{node.state} in {node.az or node.region} {text}")
    for region in dict.fromkeys(n.region for n in there):
        lines.append(f"remove them: {down_command(cluster, region)}  "
                     "(or run `clusterkit up` again to finish)")
    return lines


def still_running(rt: Runtime, trail: Trail) -> list[str]:
    """Look the cluster up by tag in the regions `up` touched (what this run knows, if
    the lookup fails, or another Ctrl-C cuts it short) and describe what still runs."""
    nodes: list[Node] = list(trail.nodes.values())
    with contextlib.suppress(ClusterkitError, KeyboardInterrupt):
        found: list[Node] = []
        for region in trail.regions:
            found += instances.cluster_instances(rt.session, region, trail.cluster)
        nodes = found
    return running_lines(trail.cluster, nodes, trail.regions)


def report_failure(rt: Runtime, trail: Trail, exc: BaseException) -> None:
    """Add what still runs to a clusterkit error (message and hint); for anything else
    (Ctrl-C, a bug) print it, as the exception's own text will not say it."""
    lines = still_running(rt, trail)
    if isinstance(exc, ClusterkitError):
        exc.message = "\n".join([exc.message, *lines[:-1]])
        exc.hint = lines[-1] + (f"; {exc.hint}" if exc.hint else "")
        return
    what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
    rt.error(f"up {what}")
    for line in lines:
        rt.info(line)
