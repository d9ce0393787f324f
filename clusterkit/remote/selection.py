"""Which nodes a `clusterkit exec --node` / `clusterkit ssh NODE` selector names. PURE.

A selector is an index (``0``, ``2``), a node name (``master``, ``worker-2``; also
``master-0``), a role (``worker`` = every worker), an instance id (``i-…``) or a
full node name (``mycluster-worker-1``, ``Node.name``).
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.errors import UsageError
from clusterkit.kinds import Role
from clusterkit.plan.nodes import Node, node_order

ROLES = {"master": Role.MASTER, "worker": Role.WORKER, "workers": Role.WORKER}  # word -> role


def node_label(node: Node) -> str:
    """How a node is named in output and per-node results: ``Node.name``
    (``<cluster>-<role>-<index>``, else its Name tag, else its id)."""
    return node.name


def labels(nodes: Sequence[Node]) -> dict[str, str]:
    """instance id -> label, unique within the cluster (a Name tag two nodes share, as
    after a crashed launch, falls back to the instance ids)."""
    names = [node_label(n) for n in nodes]
    return {n.instance_id: name if names.count(name) == 1 else n.instance_id
            for n, name in zip(nodes, names, strict=True)}


def ordered(nodes: Sequence[Node]) -> list[Node]:
    """Master first, then workers by index; untagged nodes (no index) last."""
    return sorted(nodes, key=node_order)


def _matches(node: Node, selector: str) -> bool:
    if selector.isdigit():
        return node.index == int(selector)
    if selector in ROLES:
        return node.index is not None and node.role == ROLES[selector]
    if node.index is not None and selector == short_name(node):
        return True
    return selector in (node.instance_id, node.name)


def short_name(node: Node) -> str:
    """``master-0``, ``worker-2``: the node's name within its cluster."""
    return f"{node.role}-{node.index}"


def _available(nodes: Sequence[Node]) -> str:
    return ", ".join(f"{n.index if n.index is not None else '?'}={node_label(n)}"
                     for n in ordered(nodes)) or "none"


def select(nodes: Sequence[Node], selectors: Sequence[str] = ()) -> list[Node]:
    """The nodes the selectors name (all when none), master first, each once.
    A selector that names no node is a usage error listing the nodes there are."""
    if not selectors:
        return ordered(nodes)
    chosen: dict[str, Node] = {}
    for selector in selectors:
        hits = [n for n in nodes if _matches(n, selector.strip())]
        if not hits:
            raise UsageError(f"no node {selector!r} in this cluster",
                             "name a node by index (2), name (master, worker-2), role "
                             f"(worker), instance id or full name; nodes: {_available(nodes)}")
        chosen.update((n.instance_id, n) for n in hits)
    return ordered(list(chosen.values()))


def select_one(nodes: Sequence[Node], selector: str | None) -> Node:
    """Exactly one node (default: the master)."""
    hits = select(nodes, [selector or "master"])
    if len(hits) > 1:
        raise UsageError(f"{selector!r} names {len(hits)} nodes; pick one",
                         f"name a node by index or full name; nodes: {_available(nodes)}")
    return hits[0]


def gateway(nodes: Sequence[Node]) -> Node | None:
    """The master (index 0): every other node is reached through it."""
    return next((n for n in nodes if n.index == 0), None)
