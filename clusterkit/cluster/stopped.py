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


def start_stopped(rt: Runtime, region: str, ids: Sequence[str], *, deadline: float) -> None:
    """Start the nodes ``ids`` (stopped or stopping): wait until a stopping node has
    stopped, then start them all in one call. `up` then waits for them to run."""
    if not ids:
        return
    rt.started(Stage.START, f"starting {len(ids)} stopped node(s): {', '.join(ids)} (their "
               "instance store was wiped; the bootstrap rebuilds it)")
    while True:
        nodes = instances.describe_nodes(rt.session, region, ids)
        busy = [n.instance_id for n in nodes if n.state == InstanceState.STOPPING]
        if not busy:
            break
        if rt.clock() >= deadline:
            raise AwsError(f"node(s) still stopping: {', '.join(busy)}",
                           "run `clusterkit up` again once they have stopped")
        rt.sleep(rt.poll)
    instances.start_instances(rt.session, region,
                              [n.instance_id for n in nodes if n.state == InstanceState.STOPPED])
