"""Node identity from tags, and the node actions `up` needs. PURE.

Every node of a cluster has an index (0 = master, the rest workers). All nodes of one
launch come from a single RunInstances call, so they are tagged alike at creation with
``clusterkit:slots`` (the indexes that launch fills, e.g. ``"1,3-5"``); EC2 numbers the
instances of one call 0..k-1 (``AmiLaunchIndex``), and ``slots[AmiLaunchIndex]`` is the
node's index. Role and name follow from the index (``Node.role``, ``Node.name``), so
no per-node tag is ever written: a launch that fills one slot carries its full identity
(``clusterkit:index``, ``clusterkit:role``, ``Name``) at creation, and a launch of the
master with workers gets its ``clusterkit:role`` tags (``pending`` at creation) in one
CreateTags per role afterwards, so a first `up` makes the same calls for 2 nodes as for
64. When a crash comes in between, the next `up` writes the missing role tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from clusterkit.kinds import (
    LIVE_STATES,
    STOPPED_STATES,
    InstanceState,
    Market,
    NodeAction,
    Role,
)

CLUSTER_TAG = "clusterkit:cluster"
ROLE_TAG = "clusterkit:role"
INDEX_TAG = "clusterkit:index"
SLOTS_TAG = "clusterkit:slots"
PRICE_TAG = "clusterkit:price"
RETAIN_TAG = "clusterkit:retain"
REGION_TAG = "clusterkit:region"  # on the IAM role (global): the region of its stack
# A standby (a rebalance recommendation's replacement, booted before it is needed): the
# index of the node it stands by for. It holds no index until it is swapped in.
STANDBY_TAG = "clusterkit:standby-for"
# A node in a Capacity Block: the block's end (ISO 8601 UTC), when AWS ends its instances
BLOCK_END_TAG = "clusterkit:capacity-block-end"


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
    instance_profile: str | None = None  # ARN of its IAM instance profile, if it has one
    primary_interface: str | None = None  # its network interface at card 0, device 0

    @property
    def role(self) -> Role:
        return Role.MASTER if self.index == 0 else Role.WORKER

    @property
    def name(self) -> str:
        """``<cluster>-<role>-<index>`` from its cluster tag and index, else the ``Name``
        tag, else the instance id (never a per-node tag: see the module docstring)."""
        cluster = self.tags.get(CLUSTER_TAG)
        if cluster and self.index is not None:
            return node_name(cluster, self.index)
        return self.tags.get("Name") or self.instance_id

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def holds_index(self) -> bool:
        """Live, not shutting down and not a standby: an instance on its way out (a lost
        node being replaced) leaves its index to a new one; `down` still waits for it."""
        return self.live and self.state != InstanceState.SHUTTING_DOWN \
            and self.standby_for is None

    @property
    def standby_for(self) -> int | None:
        """The node index this instance is a standby for (None: not a standby)."""
        value = self.tags.get(STANDBY_TAG, "")
        return int(value) if value.isdigit() else None

    @property
    def block_end(self) -> float | None:
        """The end of the Capacity Block the node runs in (epoch seconds), from its tag;
        None: not in a block (or the tag is not a time)."""
        try:
            end = datetime.strptime(self.tags.get(BLOCK_END_TAG, ""), "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return None
        return end.replace(tzinfo=timezone.utc).timestamp()


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
    """The full identity tags of one node (a launch of that one slot carries them)."""
    return {INDEX_TAG: str(index), ROLE_TAG: role_of(index), "Name": node_name(cluster, index)}


def standby_tags(cluster: str, index: int) -> dict[str, str]:
    """The creation tags of a standby for node ``index``: the cluster's, no index."""
    return {CLUSTER_TAG: cluster, STANDBY_TAG: str(index), ROLE_TAG: "standby",
            "Name": f"{node_name(cluster, index)}-standby"}


def swap_tags(cluster: str, index: int) -> tuple[dict[str, str], tuple[str, ...]]:
    """(tags to write, tag keys to delete) that make a standby node ``index``."""
    return wanted_tags(cluster, index), (STANDBY_TAG,)


def role_tags(cluster: str, role: Role) -> dict[str, str]:
    """The tags every node of ``role`` shares, written in one CreateTags for all of them:
    the master (one node) gets its whole identity, the workers their role and a ``Name``
    for the console (``Node.name`` computes each worker's own name)."""
    if role == Role.MASTER:
        return wanted_tags(cluster, 0)
    return {ROLE_TAG: str(role), "Name": f"{cluster}-{role}"}


def launch_tags(cluster: str, slots: Sequence[int]) -> dict[str, str]:
    """Creation tags of one launch, the same on its instances and their volumes (one
    RunInstances call tags every instance alike). ``clusterkit:index`` and a per-node
    ``Name`` only when the launch fills one slot; when all its slots share one role,
    that role's tags; else ``clusterkit:role`` is ``pending`` until `up` writes the
    role tags (one call per role)."""
    tags = {CLUSTER_TAG: cluster, SLOTS_TAG: format_slots(slots)}
    if len(slots) == 1:
        return {**tags, **wanted_tags(cluster, slots[0])}
    roles = {role_of(i) for i in slots}
    if len(roles) == 1:
        return {**tags, **role_tags(cluster, roles.pop())}
    return {**tags, ROLE_TAG: Role.PENDING, "Name": f"{cluster}-node"}


@dataclass(frozen=True)
class Retag:
    """One CreateTags: these tags on these instances (and their root volumes)."""

    instance_ids: tuple[str, ...]
    tags: Mapping[str, str]
    volume_ids: tuple[str, ...] = ()  # their root volumes, tagged alike

    @property
    def resources(self) -> tuple[str, ...]:
        return (*self.instance_ids, *self.volume_ids)


@dataclass(frozen=True)
class NodeActions:
    """What `up` must do to the nodes: launch these indexes, terminate these ids,
    write these role tags (one ``Retag`` per role, whatever the node count), and start
    these stopped ids."""

    launch: tuple[int, ...] = ()
    terminate: tuple[str, ...] = ()
    retag: tuple[Retag, ...] = ()
    start: tuple[str, ...] = ()

    @property
    def retag_ids(self) -> tuple[str, ...]:
        return tuple(i for r in self.retag for i in r.instance_ids)

    @property
    def empty(self) -> bool:
        return not (self.launch or self.terminate or self.retag or self.start)

    def by_node(self, nodes: Sequence[Node]) -> dict[str, NodeAction]:
        """Each live node's action (instance id -> NodeAction), and each missing index's
        (``"index N"`` -> LAUNCH): the plan per node, as `plan --json` lists it."""
        out: dict[str, NodeAction] = {}
        retag = set(self.retag_ids)
        for node in (n for n in nodes if n.holds_index):
            iid = node.instance_id
            out[iid] = (NodeAction.TERMINATE if iid in self.terminate
                        else NodeAction.START if iid in self.start
                        else NodeAction.RETAG if iid in retag else NodeAction.KEEP)
        return {**out, **{f"index {i}": NodeAction.LAUNCH for i in self.launch}}


def node_actions(cluster: str, count: int, nodes: Sequence[Node]) -> NodeActions:
    """Scale to ``count``: launch missing indexes, terminate the highest surplus ones
    (and duplicates of an index, keeping the earliest launched), fix role tags that
    are missing or wrong (one ``Retag`` per role)."""
    live = sorted((n for n in nodes if n.holds_index),
                  key=lambda n: (n.launch_time, n.instance_id))
    keep: dict[int, Node] = {}
    terminate: list[str] = []
    for node in live:
        if node.index is None or node.index >= count or node.index in keep:
            terminate.append(node.instance_id)
        else:
            keep[node.index] = node
    retag = _retag(cluster, keep)
    missing = tuple(i for i in range(count) if i not in keep)
    start = tuple(n.instance_id for _, n in sorted(keep.items()) if n.state in STOPPED_STATES)
    return NodeActions(missing, tuple(terminate), retag, start)


def _retag(cluster: str, keep: Mapping[int, Node]) -> tuple[Retag, ...]:
    """The nodes whose ``clusterkit:role`` tag is not their role, grouped by role."""
    wrong: dict[Role, list[Node]] = {}
    for index, node in sorted(keep.items()):
        if node.tags.get(ROLE_TAG) != role_of(index):
            wrong.setdefault(role_of(index), []).append(node)
    return tuple(Retag(tuple(n.instance_id for n in nodes), role_tags(cluster, role),
                       tuple(v for n in nodes for v in n.volume_ids))
                 for role, nodes in wrong.items())


def launched_retag(cluster: str, launched: Sequence[Node]) -> tuple[Retag, ...]:
    """The role tags a launch of several roles leaves to write (its instances carry
    ``pending``: ``launch_tags``), one group per role, by the index each node got."""
    return _retag(cluster, {n.index: n for n in launched if n.index is not None})
