"""Stopped nodes: `up` starts them again instead of replacing them.

A stopped instance keeps its root EBS volume (and so its host key and the bootstrap's
receipts) but loses its instance-store disks: the scratch RAID comes back empty, and
the bootstrap's device steps, which check the live system, rebuild it."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws import instances
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError
from clusterkit.events import Stage
from clusterkit.kinds import InstanceState
from clusterkit.plan.nodes import Node


def start_stopped(rt: Runtime, region: str, ids: Sequence[str], *, deadline: float) -> None:
    """Start the nodes ``ids`` (stopped or stopping): wait until a stopping node has
    stopped, then start them all in one call. `up` then waits for them to run."""
    if not ids:
        return
    rt.started(Stage.START, f"starting {len(ids)} stopped node(s): {', '.join(ids)} (their "
               "instance store was wiped; the bootstrap rebuilds it)")
    def probe() -> tuple[bool, list[Node]]:
        nodes = instances.describe_nodes(rt.session, region, ids)
        return not any(n.state == InstanceState.STOPPING for n in nodes), nodes

    nodes = rt.wait_until(probe, deadline=deadline, late=lambda seen: AwsError(
        "node(s) still stopping: " + ", ".join(n.instance_id for n in seen
                                               if n.state == InstanceState.STOPPING),
        "run `clusterkit up` again once they have stopped"))
    instances.start_instances(rt.session, region,
                              [n.instance_id for n in nodes if n.state == InstanceState.STOPPED])
