"""`clusterkit deploy-dataset`: check the snapshot, give every running node its own clone
of it (reused when one is attached already: a second run changes nothing), swap the
clones of another snapshot after a yes, then bootstrap (the `dataset` step mounts the
clone read-only by volume id and verifies it against the manifest), one line per node."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterkit.aws import stack as cfn
from clusterkit.aws import volumes
from clusterkit.bootstrap.run import BootstrapError, BootstrapResult, NodeBootstrap, Outcome
from clusterkit.cluster.access.target import open_cluster
from clusterkit.cluster.dataset.checks import checked_snapshot, dataset_view
from clusterkit.cluster.provision.bootstrap import bootstrap_nodes
from clusterkit.cluster.runtime import Runtime, at_once
from clusterkit.errors import AwsError, ClusterkitError, UsageError
from clusterkit.events import Kind, Stage
from clusterkit.kinds import InstanceState
from clusterkit.plan import dataset as pd
from clusterkit.plan.launch import base_tags
from clusterkit.plan.nodes import Node, node_order
from clusterkit.plan.provision import ProvisionRecord, StackRecord
from clusterkit.plan.stack import stack_name
from clusterkit.spec.model import Dataset, Spec

Confirm = Callable[[str], bool]
VERIFY_MODES = ("size", "full")
FIRST_POLL = 0.1  # seconds before the second look at volumes not ready yet


@dataclass(frozen=True)
class NodeDeploy:
    index: int
    instance_id: str
    volume_id: str
    action: str  # "kept" | "settled" (kept, DeleteOnTermination set) | "attached" | "created"
    line: str  # the dataset step's last line on the node (or why it did not run)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "instance_id": self.instance_id,
                "volume_id": self.volume_id, "action": self.action, "line": self.line}


@dataclass(frozen=True)
class DeployResult:
    cluster: str
    region: str
    snapshot: str
    size_gib: int
    nodes: tuple[NodeDeploy, ...]
    removed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    bootstrap: BootstrapResult | None = None

    @property
    def changed(self) -> bool:
        return bool(self.removed) or any(n.action != "kept" for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "region": self.region, "snapshot": self.snapshot,
                "size_gib": self.size_gib, "nodes": [n.to_json() for n in self.nodes],
                "removed": list(self.removed), "warnings": list(self.warnings),
                "changed": self.changed,
                "bootstrap": self.bootstrap.to_json() if self.bootstrap else None}


def do_deploy_dataset(spec_file: str, *, snapshot: str | None = None, verify: str = "size",
                      prewarm: bool = False, yes: bool = False, confirm: Confirm | None = None,
                      rt: Runtime | None = None, profile: str | None = None,
                      timeout: float = 1800.0) -> DeployResult:
    """``snapshot``: --snapshot (else the spec's storage.dataset.snapshot); ``confirm``
    asks before replacing the clones of another snapshot (None: no terminal, refused
    unless ``yes``)."""
    from clusterkit.spec import load

    spec = load(spec_file)
    rt = rt or Runtime.make(region=spec.region, profile=profile)
    return deploy(rt, spec, snapshot, verify=verify, prewarm=prewarm, yes=yes,
                  confirm=confirm, timeout=timeout)


def _running(rt: Runtime, spec: Spec) -> tuple[str, list[Node]]:
    region, nodes = open_cluster(spec).find(rt)
    live = [n for n in nodes if n.live]
    if region is None or not live:
        raise ClusterkitError(f"no cluster {spec.name} in {', '.join(spec.regions)}",
                              f"`clusterkit up {spec.file}` first")
    down = [n for n in live if n.state != InstanceState.RUNNING or n.index is None]
    if down:
        raise ClusterkitError(f"node(s) not running: {', '.join(n.instance_id for n in down)}",
                              f"`clusterkit up {spec.file}` starts them and writes the tags")
    return region, sorted(live, key=node_order)


def deploy(rt: Runtime, spec: Spec, snapshot: str | None, *, verify: str = "size",
           prewarm: bool = False, yes: bool = False, confirm: Confirm | None = None,
           timeout: float = 1800.0) -> DeployResult:
    ds = spec.storage.dataset or Dataset()
    snapshot_id = snapshot or ds.snapshot
    if not snapshot_id:
        raise UsageError("no snapshot to deploy", "pass --snapshot snap-… or set "
                         "storage.dataset.snapshot in the spec")
    if verify not in VERIFY_MODES:
        raise UsageError(f"--verify {verify}: not one of {', '.join(VERIFY_MODES)}", "")
    deadline = rt.clock() + timeout
    region, nodes = _running(rt, spec)
    snap, verdict = checked_snapshot(rt, snapshot_id, region, ds.size_gb)
    for warning in verdict.warnings:
        rt.warn(warning, stage=Stage.DATASET)
    slots = [pd.NodeSlot(n.index or 0, n.instance_id, n.az) for n in nodes]
    plan = pd.plan_deploy(snapshot_id, slots, volumes.dataset_clones(rt.session, region,
                                                                     spec.name))
    _ask(spec, snapshot_id, plan, yes=yes, confirm=confirm)
    made = _Made()
    try:
        _remove(rt, region, plan.remove, deadline)
        attached = _provision(rt, spec, region, ds, snapshot_id, verdict.size_gib, slots, plan,
                              made, deadline)
    except (Exception, KeyboardInterrupt) as exc:
        _report_made(rt, spec, region, made, exc)
        raise
    view = dataset_view(ds, attached, snap, verify=verify, prewarm=prewarm)
    stack = StackRecord.of(region, cfn.describe_stack(rt.session, region,
                                                      stack_name(spec.name)))
    try:
        booted = bootstrap_nodes(rt, spec, ProvisionRecord(stack, kept=tuple(nodes)),
                                 dataset=view,
                                 timeout=max(60.0, deadline - rt.clock()))
    except BootstrapError as err:
        for line in node_lines(err.result):
            rt.error(line, stage=Stage.DATASET, level=1)
        raise
    rows = tuple(NodeDeploy(s.index, s.instance_id, attached[s.index], made.action(s.index),
                            node_lines_by_id(booted).get(s.instance_id, "")) for s in slots)
    return DeployResult(spec.name, region, snapshot_id, verdict.size_gib, rows,
                        tuple(c.volume_id for c in plan.remove), verdict.warnings, booted)


def _ask(spec: Spec, snapshot_id: str, plan: pd.DeployPlan, *, yes: bool,
         confirm: Confirm | None) -> None:
    """Replacing another snapshot's attached clones needs a yes (like `up`)."""
    old = plan.replaces
    if not old or yes:
        return
    what = (f"replace the dataset volumes of {len(old)} node(s) of cluster {spec.name} "
            f"({', '.join(sorted({c.snapshot_id for c in old}))}) with clones of "
            f"{snapshot_id}: the old volumes are deleted")
    if confirm is None:
        raise UsageError(f"deploy-dataset would {what}, and there is no terminal to ask on: "
                         "nothing changed", "pass --yes to go ahead without asking")
    if not confirm(f"{what}. go ahead?"):
        raise ClusterkitError("declined: nothing changed",
                              "the cluster keeps its current dataset volumes")


class _Made:
    """What this run created, for the failure report and the result rows."""

    def __init__(self) -> None:
        self.created: dict[int, str] = {}
        self.attached: set[int] = set()
        self.settled: set[int] = set()  # kept, DeleteOnTermination set now

    def action(self, index: int) -> str:
        if index in self.created:
            return "created"
        if index in self.attached:
            return "attached"
        return "settled" if index in self.settled else "kept"


def _remove(rt: Runtime, region: str, clones: Sequence[pd.Clone], deadline: float) -> None:
    """Detach (the node's dataset step unmounts the stale mount) and delete the old clones,
    all at once; only volumes tagged as this cluster's clones ever get here."""
    attached = [c for c in clones if c.instance_id]
    at_once(attached, lambda c: volumes.detach_volume(rt.session, region, c.volume_id,
                                                        c.instance_id))
    _wait(rt, region, [c.volume_id for c in attached], lambda c: c.instance_id is None,
          "detached", deadline)

    def delete(clone: pd.Clone) -> None:
        volumes.delete_volume(rt.session, region, clone.volume_id)
        rt.emit(Kind.PROGRESS, f"deleted dataset volume {clone.volume_id} "
                f"({clone.snapshot_id})", stage=Stage.DATASET, level=1)

    at_once(clones, delete)


def _wait(rt: Runtime, region: str, ids: Sequence[str], ready: Callable[[pd.Clone], bool],
          what: str, deadline: float) -> list[pd.Clone]:
    """Until every volume of ``ids`` is ``ready``: one DescribeVolumes for all of them a
    round, the rounds FIRST_POLL apart at first, doubling up to ``rt.poll`` (a volume is
    often ready at once: a fixed poll would make every deploy wait a whole interval)."""
    def probe() -> tuple[bool, list[pd.Clone]]:
        found = volumes.describe_clones(rt.session, region, ids) if ids else []
        return len(found) == len(ids) and all(ready(c) for c in found), found

    def late(found: list[pd.Clone]) -> AwsError:
        left = [c.volume_id for c in found if not ready(c)]
        return AwsError(f"volume(s) not {what} in time: {', '.join(left or ids)}",
                        "run `clusterkit deploy-dataset` again to resume")

    return rt.wait_until(probe, deadline=deadline, late=late, first=FIRST_POLL)


def client_token(cluster: str, snapshot_id: str, slot: pd.NodeSlot) -> str:
    """The same node, instance and snapshot => the same token: a retried CreateVolume
    returns the volume it made, never a second one."""
    text = f"{cluster}|{snapshot_id}|{slot.index}|{slot.instance_id}"
    return "ck-ds-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def _provision(rt: Runtime, spec: Spec, region: str, ds: Dataset, snapshot_id: str,
               size_gib: int, slots: Sequence[pd.NodeSlot], plan: pd.DeployPlan, made: _Made,
               deadline: float) -> dict[int, str]:
    """Every node's clone attached; {index: volume id}. The volumes created at once, each
    attached as soon as it is available, then one wait for every attachment, then
    DeleteOnTermination at once; each wait one DescribeVolumes a round for the volumes
    it waits for: no per-node call but the per-volume and per-instance ones."""
    todo = [s for s in slots if s.index not in plan.keep]
    total = len(slots)
    rt.started(Stage.DATASET, f"dataset {snapshot_id}: {len(plan.keep)} of {total} node(s) "
               f"have their volume; {len(plan.create)} to create, {len(plan.attach)} to attach")
    out = {i: c.volume_id for i, c in (*plan.keep.items(), *plan.attach.items())}
    new = [s for s in todo if s.index not in plan.attach]
    made_ids = at_once(new, lambda s: _create(rt, spec, region, ds, snapshot_id, size_gib,
                                                s, made))
    out.update({s.index: vol for s, vol in zip(new, made_ids, strict=True)})
    ids = [out[s.index] for s in todo]
    _attach_when_ready(rt, region, {out[s.index]: s for s in todo}, made, deadline)
    owner = {out[s.index]: s.instance_id for s in todo}
    _wait(rt, region, ids, lambda c: c.state == "in-use"
          and c.instance_id == owner[c.volume_id], "attached", deadline)
    done = itertools.count(len(plan.keep) - len(plan.settle) + 1)
    device = {s.index: (plan.keep[s.index].device or pd.DEVICE_HINT) if s.index in plan.keep
              else pd.DEVICE_HINT for s in slots}

    def settle(slot: pd.NodeSlot) -> None:
        volumes.delete_on_termination(rt.session, region, slot.instance_id, device[slot.index])
        if slot.index in plan.keep:
            made.settled.add(slot.index)
        rt.emit(Kind.PROGRESS, f"node {slot.index} ({slot.instance_id}): "
                f"{out[slot.index]} attached", stage=Stage.DATASET, node=slot.instance_id,
                done=next(done), total=total, level=1)

    at_once(todo + [s for s in slots if s.index in plan.settle], settle)
    rt.done(Stage.DATASET, f"dataset {snapshot_id}: a volume attached on each of "
            f"{total} node(s)")
    return out


def _attach_when_ready(rt: Runtime, region: str, waiting: dict[str, pd.NodeSlot],
                       made: _Made, deadline: float) -> None:
    """Attach each volume of ``waiting`` (volume id -> its node) as soon as it is
    available, not when the slowest is: one DescribeVolumes a round for those still
    creating, the rounds FIRST_POLL apart at first, doubling up to ``rt.poll``."""
    waiting = dict(waiting)

    def attach(item: tuple[str, pd.NodeSlot]) -> None:
        volume_id, slot = item
        volumes.attach_volume(rt.session, region, volume_id, slot.instance_id,
                              pd.DEVICE_HINT)
        made.attached.add(slot.index)

    def probe() -> tuple[bool, list[str]]:
        found = volumes.describe_clones(rt.session, region, list(waiting))
        ready = [(c.volume_id, waiting.pop(c.volume_id)) for c in found
                 if c.volume_id in waiting and c.state in ("available", "in-use")]
        at_once(ready, attach)
        return not waiting, list(waiting)

    if waiting:
        rt.wait_until(probe, deadline=deadline, first=FIRST_POLL, late=lambda left: AwsError(
            f"volume(s) not available in time: {', '.join(left)}",
            "run `clusterkit deploy-dataset` again to resume"))


def _create(rt: Runtime, spec: Spec, region: str, ds: Dataset, snapshot_id: str,
            size_gib: int, slot: pd.NodeSlot, made: _Made) -> str:
    vol = volumes.create_clone(
        rt.session, region, az=slot.az, snapshot_id=snapshot_id, size_gib=size_gib,
        volume_type=ds.volume_type, iops=ds.iops, throughput=ds.throughput,
        initialization_rate=ds.initialization_rate,
        tags=pd.clone_tags(base_tags(spec), snapshot_id, slot.index),
        client_token=client_token(spec.name, snapshot_id, slot),
        kms_key=spec.storage.kms_key)
    made.created[slot.index] = vol
    return vol


def _report_made(rt: Runtime, spec: Spec, region: str, made: _Made,
                 exc: BaseException) -> None:
    """Say what this run created and what of it still exists (and costs)."""
    if not made.created:
        rt.error(f"deploy-dataset failed before creating any volume ({exc})",
                 stage=Stage.DATASET)
        return
    try:
        live = volumes.describe_clones(rt.session, region, list(made.created.values()))
    except ClusterkitError:
        live = []
    rt.error(f"deploy-dataset failed ({exc}); it created {len(made.created)} volume(s):",
             stage=Stage.DATASET)
    for clone in live:
        where = f"attached to {clone.instance_id}" if clone.instance_id else "not attached"
        rt.error(f"{clone.volume_id}: {clone.size_gib} GiB, {clone.state}, {where}: it costs "
                 "storage until deleted", stage=Stage.DATASET, level=1)
    rt.info(f"`clusterkit deploy-dataset {spec.file} …` again reuses them; "
            f"`clusterkit down {spec.name}` deletes them with the cluster",
            stage=Stage.DATASET)


def node_lines_by_id(result: BootstrapResult) -> dict[str, str]:
    return {n.node.instance_id: _line(n) for n in result.nodes}


def node_lines(result: BootstrapResult) -> list[str]:
    return [f"{n.label}: {_line(n)}" for n in result.nodes]


def _line(node: NodeBootstrap) -> str:
    if node.error:
        return node.error
    step = next((s for s in node.steps if s.step == "dataset"), None)
    if step is None:
        return "no dataset step ran"
    if step.outcome is Outcome.RAN and step.output.strip():
        return step.output.strip().splitlines()[-1]
    return f"{step.outcome.value} ({step.reason})" + (
        f": {step.output.strip().splitlines()[-1]}" if step.output.strip() else "")


def clones_by_index(rt: Runtime, cluster: str, region: str, nodes: Sequence[Node],
                    snapshot_id: str) -> Mapping[int, str]:
    """{node index: volume id} of the attached clones of ``snapshot_id``."""
    index_of = {n.instance_id: n.index for n in nodes if n.index is not None}
    return {index_of[c.instance_id]: c.volume_id
            for c in volumes.dataset_clones(rt.session, region, cluster)
            if c.snapshot_id == snapshot_id and c.instance_id in index_of}
