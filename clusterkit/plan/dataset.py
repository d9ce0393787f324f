"""Dataset snapshots and their per-node clones: the checks a snapshot must pass before any
volume is made from it, which volumes are a cluster's clones, the volume size, and what
the clones cost. PURE.

A clone is an EBS volume tagged with the cluster whose ``clusterkit:dataset-snapshot``
tag names its own ``SnapshotId``. That one rule covers both ways clones are made:
`deploy-dataset` tags each volume it creates (and adds ``clusterkit:role=dataset`` and
``clusterkit:node-index``), and a launch with ``storage.dataset.snapshot`` tags every
volume of the launch alike (one RunInstances call cannot tag per volume): the root
volume then carries the tag too, but its SnapshotId is the image's, so it never matches.
A launch-time clone's node is the instance it is attached to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from clusterkit.spec.model import Dataset

DATASET_TAG = "clusterkit:dataset"  # the label snapshot-dataset gives a snapshot
PUBLISHED_TAG = "clusterkit:published"  # "complete": written only after CompleteSnapshot
UPLOAD_TAG = "clusterkit:dataset-upload"  # LABEL: on a snapshot-dataset upload from its start
MANIFEST_TAG = "clusterkit:manifest-sha256"
CLONE_OF_TAG = "clusterkit:dataset-snapshot"  # on a clone: the snapshot it was made from
NODE_INDEX_TAG = "clusterkit:node-index"
DATASET_ROLE = "dataset"
DEVICE_HINT = "/dev/sdf"  # AttachVolume wants a name; the node finds the device by volume id
DEFAULT_MOUNT = "/data"
GIB = 1024 ** 3

# us-east-1 list prices (docs/howto/datasets.md, "Deploying a dataset"): gp3 includes
# 3000 IOPS and 125 MiB/s; io1/io2 bill every provisioned IOPS (io2's tiers above 32000 are cheaper:
# this overstates those).
BASE_IOPS = {"gp3": 3000}
BASE_THROUGHPUT = {"gp3": 125}
IOPS_MONTH = {"gp3": 0.005, "io1": 0.065, "io2": 0.065}
THROUGHPUT_MONTH = 0.040  # gp3, per MiB/s-month above 125
# ASSUMED per GiB initialized at a provisioned rate (docs/howto/datasets.md)
INIT_RATE_PER_GIB = 0.0015


class SnapshotState(str, Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    ERROR = "error"
    RECOVERABLE = "recoverable"
    RECOVERING = "recovering"


@dataclass(frozen=True)
class Snapshot:
    """One EBS snapshot as DescribeSnapshots shows it (built in aws/volumes.py)."""

    snapshot_id: str
    region: str
    state: str
    size_gib: int
    progress: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        return self.tags.get(PUBLISHED_TAG) == "complete"

    @property
    def manifest_sha256(self) -> str | None:
        return self.tags.get(MANIFEST_TAG) or None

    @property
    def label(self) -> str | None:
        return self.tags.get(DATASET_TAG) or self.tags.get(UPLOAD_TAG) or None


@dataclass(frozen=True)
class Clone:
    """One dataset volume of a cluster (built in aws/volumes.py)."""

    volume_id: str
    snapshot_id: str
    az: str
    state: str  # creating | available | in-use | deleting ...
    size_gib: int
    instance_id: str | None  # attached (or attaching) to
    device: str | None
    node_index: int | None  # its own tag (deploy-dataset's clones) else None
    tags: Mapping[str, str] = field(default_factory=dict)
    # the attachment's flag as AWS reports it; None: not attached, or not reported
    delete_on_termination: bool | None = None


@dataclass(frozen=True)
class SnapshotVerdict:
    """Whether volumes may be made from the snapshot: ``error`` (exit 2, with ``hint``) or
    fine, with ``warnings`` to show and the volume size to use."""

    error: str | None = None
    hint: str = ""
    warnings: tuple[str, ...] = ()
    size_gib: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


def check_snapshot(snapshot_id: str, region: str, found: Snapshot | None,
                   elsewhere: Sequence[str] = (), size_gb: int | None = None) -> SnapshotVerdict:
    """``found``: the snapshot in the cluster's ``region`` (None: not there);
    ``elsewhere``: other regions that hold a snapshot of that id; ``size_gb``: the
    spec's explicit volume size (None: the snapshot's own size)."""
    if found is None:
        if elsewhere:
            return SnapshotVerdict(
                f"snapshot {snapshot_id} is in {', '.join(elsewhere)}, not in the cluster's "
                f"region {region}", f"copy it: `aws ec2 copy-snapshot --source-region "
                f"{elsewhere[0]} --source-snapshot-id {snapshot_id} --region {region}`, "
                "then deploy the copy's id")
        return SnapshotVerdict(f"no snapshot {snapshot_id} in {region}",
                               "check the id (`aws ec2 describe-snapshots --owner-ids self`); "
                               "`clusterkit snapshot-dataset DIR` publishes one")
    verdict = _state_verdict(found)
    if verdict is not None:
        return verdict
    if size_gb is not None and size_gb < found.size_gib:
        return SnapshotVerdict(
            f"snapshot {snapshot_id} holds {found.size_gib} GiB, larger than "
            f"storage.dataset.size_gb ({size_gb})",
            f"set size_gb to at least {found.size_gib}, or leave it out (the volume size is "
            "then the snapshot's)")
    warnings = ()
    if not found.published and found.label is None:
        warnings = (f"snapshot {snapshot_id} was not published by `clusterkit "
                    "snapshot-dataset`: no manifest digest to check the nodes' copies against",)
    return SnapshotVerdict(warnings=warnings, size_gib=size_gb or found.size_gib)


def _state_verdict(snap: Snapshot) -> SnapshotVerdict | None:
    sid = snap.snapshot_id
    if snap.state == SnapshotState.PENDING:
        return SnapshotVerdict(f"snapshot {sid} is not completed yet (pending"
                               + (f", {snap.progress}" if snap.progress else "") + ")",
                               "wait until it is `completed`, then run deploy-dataset again")
    if snap.state != SnapshotState.COMPLETED:
        return SnapshotVerdict(f"snapshot {sid} is in state {snap.state}, not completed",
                               "publish the dataset again (`clusterkit snapshot-dataset`)")
    if snap.label is not None and not snap.published:
        return SnapshotVerdict(
            f"snapshot {sid} (dataset {snap.label}) has no `{PUBLISHED_TAG}=complete` tag: "
            "its upload was interrupted and it may be incomplete",
            "run `clusterkit snapshot-dataset` again; delete the unfinished snapshot with "
            f"`aws ec2 delete-snapshot --snapshot-id {sid}`")
    return None


def is_clone(tags: Mapping[str, str], snapshot_id: str | None) -> bool:
    return bool(snapshot_id) and tags.get(CLONE_OF_TAG) == snapshot_id


def clone_tags(base: Mapping[str, str], snapshot_id: str, index: int) -> dict[str, str]:
    """The tags of one clone `deploy-dataset` creates for node ``index``."""
    return {**base, CLONE_OF_TAG: snapshot_id, "clusterkit:role": DATASET_ROLE,
            NODE_INDEX_TAG: str(index)}


def clone_index(clone: Clone, index_of: Mapping[str, int]) -> int | None:
    """The node a clone belongs to: the instance it is attached to, else its own tag."""
    if clone.instance_id and clone.instance_id in index_of:
        return index_of[clone.instance_id]
    return clone.node_index


def volume_gib(size_bytes: int) -> int:
    return max(1, math.ceil(size_bytes / GIB))


# -- cost -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DatasetCost:
    """Monthly $ of ``count`` clones (storage, IOPS/throughput above the baseline) and the
    one-off initialization charge (None: no rate bought)."""

    count: int
    size_gib: int | None
    per_month: float | None
    initialization: float | None

    def lines(self, ds: Dataset, hours_per_month: int = 730) -> list[str]:
        size = f"{self.size_gib} GiB" if self.size_gib else "the snapshot's size"
        money = "price unknown" if self.per_month is None else \
            f"${self.per_month:.2f}/month (${self.per_month / hours_per_month:.4f}/h)"
        out = [f"dataset volumes: {self.count} x {size} {ds.volume_type}"
               + (f", {ds.iops} IOPS" if ds.iops else "")
               + (f", {ds.throughput} MiB/s" if ds.throughput else "") + f" = {money}"]
        if ds.initialization_rate:
            once = "?" if self.initialization is None else f"${self.initialization:.2f}"
            out.append(f"  initialization rate {ds.initialization_rate} MiB/s: {once} once "
                       f"(assumed ${INIT_RATE_PER_GIB}/GiB initialized; see "
                       "docs/howto/datasets.md)")
        return out


def dataset_cost(ds: Dataset, count: int, size_gib: int | None,
                 per_gb_month: Mapping[str, float]) -> DatasetCost:
    """``per_gb_month``: the EBS storage prices (plan.spend's table)."""
    if size_gib is None or ds.volume_type not in per_gb_month:
        return DatasetCost(count, size_gib, None, None)
    each = per_gb_month[ds.volume_type] * size_gib
    if ds.iops and ds.volume_type in IOPS_MONTH:
        each += max(0, ds.iops - BASE_IOPS.get(ds.volume_type, 0)) * IOPS_MONTH[ds.volume_type]
    if ds.throughput and ds.volume_type == "gp3":
        each += max(0, ds.throughput - BASE_THROUGHPUT["gp3"]) * THROUGHPUT_MONTH
    init = round(INIT_RATE_PER_GIB * size_gib * count, 2) if ds.initialization_rate else None
    return DatasetCost(count, size_gib, round(each * count, 2), init)


def hydration(detail: Mapping[str, object] | None) -> str:
    """A volume's initialization as `status` shows it: ``"42%"``, ``"done"`` or
    ``"unknown"`` (AWS reports it only for some volumes; the emulator never)."""
    if not detail or detail.get("progress") is None:
        return "unknown"
    try:
        progress = int(str(detail["progress"]))
    except ValueError:
        return "unknown"
    if progress >= 100:
        return "done"
    eta = detail.get("eta_s")
    return f"{progress}%" + (f" (~{int(str(eta)) // 60} min left)" if eta else "")


# -- what deploy-dataset changes ------------------------------------------------------------

@dataclass(frozen=True)
class NodeSlot:
    """A running node as deploy-dataset sees it."""

    index: int
    instance_id: str
    az: str


@dataclass(frozen=True)
class DeployPlan:
    """Per node index: a clone of the snapshot already attached (``keep``), one that exists
    but is not attached (``attach``), or none (``create``); and the clones to remove
    (another snapshot's, a spare, one in the wrong AZ)."""

    keep: Mapping[int, Clone]
    attach: Mapping[int, Clone]
    create: tuple[int, ...]
    remove: tuple[Clone, ...]

    @property
    def changes(self) -> bool:
        return bool(self.attach or self.create or self.remove or self.settle)

    @property
    def settle(self) -> tuple[int, ...]:
        """Kept clones whose attachment would outlive its instance (an earlier run stopped
        between AttachVolume and DeleteOnTermination): they get the flag."""
        return tuple(i for i, c in sorted(self.keep.items())
                     if c.delete_on_termination is False)

    @property
    def replaces(self) -> tuple[Clone, ...]:
        """The clones of another snapshot still attached: swapping them needs a yes."""
        return tuple(c for c in self.remove if c.instance_id)


def plan_deploy(snapshot_id: str, nodes: Sequence[NodeSlot],
                clones: Sequence[Clone]) -> DeployPlan:
    index_of = {n.instance_id: n.index for n in nodes}
    by_index = {n.index: n for n in nodes}
    keep: dict[int, Clone] = {}
    attach: dict[int, Clone] = {}
    remove: list[Clone] = []
    # attached clones first, so a detached spare of the same node is the one removed
    for clone in sorted(clones, key=lambda c: (c.instance_id is None, c.volume_id)):
        index = clone_index(clone, index_of)
        node = by_index.get(index) if index is not None else None
        if clone.snapshot_id != snapshot_id or node is None or clone.az != node.az \
                or index in keep or index in attach:
            remove.append(clone)
        elif clone.instance_id == node.instance_id:
            keep[node.index] = clone
        elif clone.instance_id is None:
            attach[node.index] = clone
        else:
            remove.append(clone)
    create = tuple(n.index for n in sorted(nodes, key=lambda n: n.index)
                   if n.index not in keep and n.index not in attach)
    return DeployPlan(keep, attach, create, tuple(remove))
