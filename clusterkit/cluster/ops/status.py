"""`clusterkit status [NAME]`: the cluster's nodes from EC2 tags alone."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from clusterkit.aws import instances, volumes
from clusterkit.cluster.access.target import open_cluster, per_region, search_regions
from clusterkit.cluster.dataset.checks import hydration
from clusterkit.cluster.jobs.results import JobSummary
from clusterkit.cluster.ops import autostop
from clusterkit.cluster.provision import kept_efs
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.kinds import InstanceState, Market, Role
from clusterkit.plan.autostop import Clock, Remains
from clusterkit.plan.cost import cluster_hourly, node_cost
from clusterkit.plan.dataset import clone_index
from clusterkit.plan.nodes import CLUSTER_TAG, Node, node_order
from clusterkit.remote.address import address_or_none


@dataclass(frozen=True)
class StatusRow:
    """One node as `status` lists it (the JSON keys are the field names)."""

    cluster: str | None
    index: int | None
    role: Role
    instance_id: str
    type: str
    region: str
    az: str
    market: Market
    state: str
    public_ip: str | None
    private_ip: str | None
    ssh_address: str | None
    launch_time: str | None
    price_per_hour: float | None
    cost_so_far: float | None
    standby_for: int | None = None  # a standby (cluster/jobs/standby.py) for that node
    block_end: float | None = None  # the end of the Capacity Block it runs in (epoch s)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StackRow:
    """The cluster's stack as `status` shows it: its state, in progress while an `up` or
    `down` (here or on another machine, or one interrupted: CloudFormation goes on)
    changes it."""

    name: str
    region: str
    status: str
    reason: str = ""

    @property
    def in_progress(self) -> bool:
        return self.status.endswith("_IN_PROGRESS")

    @property
    def settled(self) -> bool:
        """Created or updated, nothing going on: not worth a line of its own."""
        return self.status in ("CREATE_COMPLETE", "UPDATE_COMPLETE")

    def describe(self) -> str:
        why = f" ({self.reason})" if self.reason and not self.in_progress else ""
        if not self.in_progress:
            return f"stack {self.name} in {self.region}: {self.status}{why}"
        return (f"stack {self.name} in {self.region}: {self.status}: an `up` or `down` of "
                "the cluster is changing it (on another machine, or one interrupted here: "
                "CloudFormation goes on); `up` waits for it to end")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "status": self.status,
                "reason": self.reason, "in_progress": self.in_progress}


@dataclass(frozen=True)
class StatusResult:
    """The nodes of one cluster (``cluster``) or of every cluster (None) in ``regions``,
    the total $/h and cost so far, and the EFS file systems the cluster keeps."""

    cluster: str | None
    regions: list[str]
    nodes: list[StatusRow]
    hourly_usd: float | None
    cost_so_far_usd: float | None
    kept_efs: list[dict[str, Any]] = field(default_factory=list)
    dataset: list[DatasetRow] = field(default_factory=list)
    job: JobSummary | None = None  # the newest training job (cluster/jobs.job_summary)
    autostop: Clock | None = None  # the master watchdog's clock, while the nodes run
    remains: Remains | None = None  # what is left where no node runs (autostopped)
    stack: StackRow | None = None  # a named cluster's stack, where it has one

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "regions": self.regions,
                "nodes": [r.to_json() for r in self.nodes], "hourly_usd": self.hourly_usd,
                "cost_so_far_usd": self.cost_so_far_usd, "kept_efs": self.kept_efs,
                "dataset": [d.to_json() for d in self.dataset],
                "job": self.job.to_json() if self.job else None,
                "autostop": self.autostop.to_json() if self.autostop else None,
                "remains": self.remains.to_json() if self.remains else None,
                "stack": self.stack.to_json() if self.stack else None}


@dataclass(frozen=True)
class DatasetRow:
    """One dataset clone of a node: its volume, snapshot and initialization ("42%",
    "done", or "unknown" where AWS does not report it)."""

    index: int | None
    instance_id: str | None
    volume_id: str
    snapshot_id: str
    size_gib: int
    hydration: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def dataset_rows(rt: Runtime, cluster: str, nodes: Sequence[Node]) -> list[DatasetRow]:
    """The cluster's dataset clones in the regions its nodes run in, with hydration."""
    index_of = {n.instance_id: n.index for n in nodes if n.index is not None}
    rows: list[DatasetRow] = []
    for region in dict.fromkeys(n.region for n in nodes):
        clones = volumes.dataset_clones(rt.session, region, cluster)
        shown = hydration(rt, region, [c.volume_id for c in clones]) if clones else {}
        rows += [DatasetRow(clone_index(c, index_of), c.instance_id, c.volume_id,
                            c.snapshot_id, c.size_gib, shown[c.volume_id]) for c in clones]
    return sorted(rows, key=lambda r: (r.index is None, r.index or 0, r.volume_id))


def node_row(node: Node, now: datetime) -> StatusRow:
    return StatusRow(
        cluster=node.tags.get(CLUSTER_TAG), index=node.index, role=node.role,
        instance_id=node.instance_id, type=node.instance_type, region=node.region,
        az=node.az, market=node.market, state=node.state,
        public_ip=node.public_ip, private_ip=node.private_ip,
        ssh_address=address_or_none(node) if node.state == InstanceState.RUNNING else None,
        launch_time=node.launch_time, price_per_hour=node.price,
        cost_so_far=node_cost(node, now), standby_for=node.standby_for,
        block_end=node.block_end)


def collect(rt: Runtime, name: str | None, regions: Sequence[str]) -> list[Node]:
    """The live nodes (stopped ones included) of cluster ``name`` (every cluster when
    None) in ``regions``, searched in parallel."""
    def one(region: str) -> list[Node]:
        if name:
            return instances.cluster_instances(rt.session, region, name)
        return instances.tagged_instances(rt.session, region, CLUSTER_TAG)

    nodes = [n for found in per_region(regions, one).values() for n in found]
    return sorted(nodes, key=lambda n: (n.tags.get(CLUSTER_TAG, ""), n.region,
                                        *node_order(n)))


def status(rt: Runtime, name: str | None, regions: Sequence[str],
           now: datetime | None = None) -> StatusResult:
    now = now or datetime.now(timezone.utc)
    regions = search_regions(rt, regions)
    nodes = collect(rt, name, regions)
    rows = [node_row(n, now) for n in nodes]
    known = [r.cost_so_far for r in rows if r.cost_so_far is not None]
    so_far = round(sum(known), 4) if rows and len(known) == len(rows) else None
    return StatusResult(name, list(regions), rows, cluster_hourly(nodes), so_far,
                        kept_efs.kept(rt, name, regions) if name else [],
                        dataset_rows(rt, name, nodes) if name and nodes else [])


def do_status(name: str | None, *, region: str | None = None, profile: str | None = None,
              rt: Runtime | None = None) -> StatusResult:
    rt = rt or Runtime.make(region=region, profile=profile)
    ref = open_cluster(name, region)
    cluster, regions = ref.name, list(ref.regions)
    result = status(rt, cluster, regions)
    if cluster and result.nodes and all(r.state == InstanceState.RUNNING for r in result.nodes):
        from clusterkit.cluster.jobs.nodejobs import job_summary

        where = region or result.nodes[0].region  # found already: no second search
        result = dataclasses.replace(result, job=job_summary(rt, name or cluster, where),
                                     autostop=_clock(name or cluster, region, rt, [where]))
    elif cluster and not any(r.state == InstanceState.RUNNING for r in result.nodes):
        where = sorted({r.region for r in result.nodes}) or regions
        result = dataclasses.replace(result, remains=autostop.remains(rt, cluster, where))
    if cluster:
        where = sorted({r.region for r in result.nodes}) or result.regions
        result = dataclasses.replace(result, stack=stack_row(rt, cluster, where))
    return result


def stack_row(rt: Runtime, cluster: str, regions: Sequence[str]) -> StackRow | None:
    """The cluster's stack in the first of ``regions`` that has it (read in parallel)."""
    from clusterkit.aws import stack as cfn
    from clusterkit.plan.stack import stack_name

    name = stack_name(cluster)
    found = per_region(list(regions), lambda r: cfn.describe_stack(rt.session, r, name))
    return next((StackRow(name, region, st["status"], st.get("reason") or "")
                 for region, st in found.items() if st), None)


def _clock(target: str, region: str | None, rt: Runtime, regions: Sequence[str],
           ) -> Clock | None:
    """The master watchdog's clock (None: no autostop, or the master cannot be read)."""
    from clusterkit.cluster.access.remote_ops import login_for

    try:
        login, _ = login_for(target, region)
        return autostop.read_clock(login, collect(rt, login.cluster, regions))
    except ClusterkitError:
        return None
