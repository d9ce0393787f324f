"""Node identity from tags, and the node actions `up` needs. PURE.

Every node of a cluster has an index (0 = master, the rest workers). All nodes of one
launch come from a single RunInstances call, so they are tagged alike at creation with
``clusterkit:slots`` (the indexes that launch fills, e.g. ``"1,3-5"``); EC2 numbers the
instances of one call 0..k-1 (``AmiLaunchIndex``), and ``slots[AmiLaunchIndex]`` is the
node's index. The per-node tags (``clusterkit:index``, ``clusterkit:role``, ``Name``)
are written right after the launch; when a crash comes in between, the index is still
known from the creation tags and the next `up` writes the missing tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from clusterkit.kinds import LIVE_STATES, STOPPED_STATES, Market, Role

CLUSTER_TAG = "clusterkit:cluster"
ROLE_TAG = "clusterkit:role"
INDEX_TAG = "clusterkit:index"
SLOTS_TAG = "clusterkit:slots"
PRICE_TAG = "clusterkit:price"
RETAIN_TAG = "clusterkit:retain"
REGION_TAG = "clusterkit:region"  # on the IAM role (global): the region of its stack


@dataclass(frozen=True)
class Node:
    """One instance of a cluster as observed in EC2 (plain data, built once in
    ``aws/instances.py``; nothing outside ``aws/`` sees the EC2 dict). The address to SSH
    to is not a field: ``remote.address.ssh_address(node)`` resolves it when dialling,
    because the sandbox maps an address only once the node has booted."""

    instance_id: str
    index: int | None
    state: str
    instance_type: str
    az: str
    market: Market
    region: str
    launch_time: str = ""  # ISO 8601
    public_ip: str | None = None
    private_ip: str | None = None  # the in-cluster address (nodes talk inside the VPC)
    subnet_id: str | None = None
    price: float | None = None  # USD/h recorded at launch
    tags: Mapping[str, str] = field(default_factory=dict)
    image_id: str = ""
    launch_index: int | None = None  # AmiLaunchIndex: its place in its RunInstances call
    volume_ids: tuple[str, ...] = ()  # EBS volumes attached at launch (the root volume)

    @property
    def role(self) -> Role:
        return Role.MASTER if self.index == 0 else Role.WORKER

    @property
    def name(self) -> str:
        """The ``Name`` tag, else the instance id."""
        return self.tags.get("Name") or self.instance_id

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


def node_order(node: Node) -> tuple[bool, int, str]:
    """Sort key: the master first, workers by index, nodes without an index last."""
    return node.index is None, node.index or 0, node.instance_id


def role_of(index: int) -> Role:
    return Role.MASTER if index == 0 else Role.WORKER


def node_name(cluster: str, index: int) -> str:
    return f"{cluster}-{role_of(index)}-{index}"


def format_slots(indexes: Iterable[int]) -> str:
    """``[1, 3, 4, 5]`` -> ``"1,3-5"`` (short enough for a 256-character tag value)."""
    items = sorted(set(indexes))
    runs: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        runs.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(runs)


def parse_slots(text: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def node_index(tags: Mapping[str, str], launch_index: int | None) -> int | None:
    """The node's index from its own tag, else from its launch's slots."""
    try:
        if INDEX_TAG in tags:
            return int(tags[INDEX_TAG])
        slots = parse_slots(tags.get(SLOTS_TAG, ""))
        if launch_index is not None and 0 <= launch_index < len(slots):
            return slots[launch_index]
    except ValueError:
        return None
    return None


def wanted_tags(cluster: str, index: int) -> dict[str, str]:
    return {INDEX_TAG: str(index), ROLE_TAG: role_of(index), "Name": node_name(cluster, index)}


def launch_tags(cluster: str, slots: Sequence[int]) -> dict[str, str]:
    """Creation tags of one launch, the same on its instances and their volumes (one
    RunInstances call tags every instance alike). ``clusterkit:index`` and a per-node
    ``Name`` only when the launch fills one slot; ``clusterkit:role`` is the launch's
    role when all its slots share one, else ``pending`` until the per-node tags follow."""
    tags = {CLUSTER_TAG: cluster, SLOTS_TAG: format_slots(slots)}
    if len(slots) == 1:
        return {**tags, **wanted_tags(cluster, slots[0])}
    roles = {role_of(i) for i in slots}
    return {**tags, ROLE_TAG: roles.pop() if len(roles) == 1 else Role.PENDING,
            "Name": f"{cluster}-node"}


@dataclass(frozen=True)
class NodeActions:
    """What `up` must do to the nodes: launch these indexes, terminate these ids,
    write these per-node tags, and start these stopped ids."""

    launch: tuple[int, ...] = ()
    terminate: tuple[str, ...] = ()
    retag: tuple[tuple[str, Mapping[str, str]], ...] = ()
    start: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.launch or self.terminate or self.retag or self.start)


def node_actions(cluster: str, count: int, nodes: Sequence[Node]) -> NodeActions:
    """Scale to ``count``: launch missing indexes, terminate the highest surplus ones
    (and duplicates of an index, keeping the earliest launched), fix missing tags."""
    live = sorted((n for n in nodes if n.live), key=lambda n: (n.launch_time, n.instance_id))
    keep: dict[int, Node] = {}
    terminate: list[str] = []
    for node in live:
        if node.index is None or node.index >= count or node.index in keep:
            terminate.append(node.instance_id)
        else:
            keep[node.index] = node
    retag = []
    for index, node in sorted(keep.items()):
        want = wanted_tags(cluster, index)
        if any(node.tags.get(k) != v for k, v in want.items()):
            retag.append((node.instance_id, want))
    missing = tuple(i for i in range(count) if i not in keep)
    start = tuple(n.instance_id for _, n in sorted(keep.items()) if n.state in STOPPED_STATES)
    return NodeActions(missing, tuple(terminate), tuple(retag), start)
