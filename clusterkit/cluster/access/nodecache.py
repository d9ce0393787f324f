"""The nodes a cluster last had, kept locally so `train` can start a job without asking
AWS (importing boto3, making a client and one DescribeInstances cost ~0.4 s before the
first process runs).

``<state>/clusters/NAME/nodes.json`` is written when `up` has made every node ready and
whenever a job command finds every node running through AWS; `down` removes it with the
rest of the cluster's local state. Like the cluster record it is a hint, never the truth:
`train` uses it only after every node answered on its first call, each with the host key
pinned for its instance (so the address still reaches that instance), and the master's
hosts block (written by the last bootstrap of the whole cluster) names exactly these
nodes. Anything else (a node gone, a new address, a cluster grown or replaced from
another machine) sends `train` to AWS, as it went before.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from clusterkit import statedir
from clusterkit.cluster.access.record import write_atomic
from clusterkit.kinds import InstanceState, Market
from clusterkit.plan.nodes import Node

FILE = "nodes.json"
VERSION = 1


def _to_json(node: Node) -> dict[str, Any]:
    data = dataclasses.asdict(node)
    data.update(market=str(node.market), tags=dict(node.tags), volume_ids=list(node.volume_ids))
    return data


def _from_json(data: dict[str, Any]) -> Node:
    return Node(**{**data, "market": Market(data["market"]), "tags": dict(data["tags"]),
                   "volume_ids": tuple(data["volume_ids"])})


def forget(cluster: str) -> None:
    """Drop the kept nodes (`up` is about to change them)."""
    (statedir.cluster_dir(cluster) / FILE).unlink(missing_ok=True)


def save(cluster: str, nodes: Sequence[Node]) -> bool:
    """Keep ``nodes`` when every one runs and has an index (else the file is dropped:
    a partial list must never stand for the cluster); True when written."""
    if not nodes or any(n.state != InstanceState.RUNNING or n.index is None for n in nodes):
        forget(cluster)
        return False
    path = statedir.cluster_dir(cluster) / FILE
    body = {"version": VERSION, "cluster": cluster, "nodes": [_to_json(n) for n in nodes]}
    write_atomic(path, json.dumps(body, indent=1) + "\n")
    return True


def load(cluster: str) -> list[Node] | None:
    """The nodes kept for ``cluster``, or None when there is no usable file."""
    try:
        data = json.loads((statedir.cluster_dir(cluster) / FILE).read_text())
        if data.get("version") != VERSION or data.get("cluster") != cluster:
            return None
        nodes = [_from_json(n) for n in data["nodes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return nodes or None
