"""`clusterkit top`: what every node of a job is doing, read from each node's sampler
(``node/samples.py``: ``metrics.jsonl`` in the job's directory) through the
observer's ``observe`` verb (its answer: ``node/frames.py``'s ``Frame``), one call
per node on connections kept open between frames, and what ``training/diagnose.py``
finds in the window read so far. A node whose records are of a newer version than this
client reads says so in its row (``error``), naming itself, the file and both versions."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.jobs import budget
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster, node_python
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError
from clusterkit.node import bundle
from clusterkit.node.frames import EXIT_UNREADABLE, Frame
from clusterkit.node.jobstate import JobState
from clusterkit.node.samples import SAMPLES, Sample
from clusterkit.node.wire import WireError
from clusterkit.remote.channels import Call
from clusterkit.remote.fanout import Connections
from clusterkit.remote.results import NodeResult
from clusterkit.training import diagnose, jobfiles, sizes
from clusterkit.training.budget import Status

WINDOW = 300.0  # seconds of samples kept per node for the diagnosis
FIRST_READ = 120  # samples asked of each node on the first frame


@dataclass(frozen=True)
class GpuRow:
    index: int
    name: str
    util: float | None
    mem_used: float | None  # MiB
    mem_total: float | None


@dataclass(frozen=True)
class NodeRow:
    """One node in a frame: its newest sample (GPUs averaged), or why there is none."""

    node: str  # master / worker-2
    index: int
    at: float | None = None  # the newest sample's time
    gpus: tuple[GpuRow, ...] = ()  # none: no GPU here, or no nvidia-smi
    job_cpu: float | None = None  # cores (CPU-seconds per second), diagnose.now
    iowait: float | None = None  # % of the node's CPU time
    net_rx: float | None = None  # bytes/s
    net_tx: float | None = None
    disk_read: float | None = None  # MB/s of the dataset volume
    disk_ms: float | None = None  # ms per read there
    samples_per_s: float | None = None  # diagnose.now: as the findings say it
    error: str | None = None  # the node did not answer

    @property
    def gpu_util(self) -> float | None:
        values = [g.util for g in self.gpus if g.util is not None]
        return sum(values) / len(values) if values else None

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "gpus"}
        data["gpus"] = [g.__dict__ for g in self.gpus]
        data["gpu_util"] = self.gpu_util
        return data


@dataclass(frozen=True)
class TopFrame:
    """Every node's row, the cluster's throughput and the findings, at ``at``."""

    cluster: str
    job_id: str
    at: float
    rows: tuple[NodeRow, ...]
    findings: tuple[diagnose.Finding, ...] = ()
    gpu_note: str = ""  # said when no node reports a GPU (the sandbox has none)
    budget: Mapping[str, Any] | None = None  # spend against the job's cap (None: no cap)
    budget_line: str = ""  # ``training.budget.Status.line``
    sizes: tuple[tuple[float, int], ...] = ()  # an elastic job's changes (the master's)
    ended: float | None = None  # when the job ended (the master's state), None: it runs

    @property
    def samples_per_s(self) -> float | None:
        rates = [r.samples_per_s for r in self.rows if r.samples_per_s is not None]
        return sum(rates) if rates else None

    def size_lines(self) -> list[str]:
        """An elastic job's size now and over time, as `train` and `status` say it."""
        return sizes.lines(self.sizes, self.ended or self.at, running=self.ended is None)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id, "at": self.at,
                "samples_per_s": self.samples_per_s,
                "nodes": [r.to_json() for r in self.rows],
                "findings": [f.to_json() for f in self.findings],
                "note": self.gpu_note or None,
                "budget": dict(self.budget) if self.budget else None,
                "size": self.size_json()}

    def size_json(self) -> dict[str, Any] | None:
        """An elastic job's size: nodes now, of the full size, the changes and the
        node-hours at each size (None: not an elastic job)."""
        if not self.sizes:
            return None
        end = self.ended or self.at
        return {"nodes": max(self.sizes)[1], "of": min(self.sizes)[1],
                "changes": [list(x) for x in self.sizes],
                "node_hours": {str(n): round(h, 6) for n, h in
                               sizes.node_hours_by_size(self.sizes, end).items()}}


def row_of(name: str, index: int, samples: Sequence[Mapping[str, Any]]) -> NodeRow:
    """A node's row from its samples (oldest first): the newest sample, its job CPU and
    samples/s as the findings quote them (``diagnose.now``: samples/s smoothed)."""
    if not samples:
        return NodeRow(name, index, error="no sample yet (the job's sampler writes one "
                                         "every train.sample_interval)")
    last = samples[-1]
    cpu, rate = diagnose.now(samples)
    net, disk = last.get("net") or {}, last.get("disk") or {}
    gpus = tuple(GpuRow(int(g.get("index", i)), str(g.get("name", "")), g.get("util"),
                        g.get("mem_used"), g.get("mem_total"))
                 for i, g in enumerate(last.get("gpus") or ()))
    return NodeRow(name, index, at=last.get("t"), gpus=gpus, job_cpu=cpu,
                   iowait=(last.get("cpu") or {}).get("iowait"), net_rx=net.get("rx_Bps"),
                   net_tx=net.get("tx_Bps"), disk_read=disk.get("read_MBps"),
                   disk_ms=disk.get("read_ms_per_op"),
                   samples_per_s=rate)


OBSERVER_MODULES = bundle.OBSERVER  # what the observer imports, sent before it


def observer_call(*args: str) -> Call:
    """The node-side observer (``node/observer.py``) with ``args``, over stdin."""
    # -S: no site (it is stdlib only); on a node with many .pth files, site is half
    # of the interpreter's start, and `top` starts one on every node each frame
    return Call(shlex.join([node_python(), "-S", "-", *args]),
                bundle.program("observer.py", OBSERVER_MODULES))


def unreadable(name: str, result: NodeResult) -> str | None:
    """What the observer said of a record it cannot read (of a newer version than the
    client's programs), naming the node; None when it failed otherwise or not at all."""
    if result.error is None and result.exit_code == EXIT_UNREADABLE:
        said = [line for line in result.stderr.splitlines() if line.strip()]
        return f"{name}: {said[-1] if said else 'a record of another version'}"
    return None


@dataclass
class Top:
    """A job's frames: each ``frame()`` asks every node, in one call each, for the samples
    taken since its last answer (keeping a ``WINDOW`` of them per node) and, every
    HEALTH_EVERY s, its GPUs' health. No job id: each node's newest, the master's is it."""

    jc: JobCluster
    job_id: str = ""
    clock: Callable[[], float] = time.time
    windows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    health: dict[int, diagnose.NodeHealth] = field(default_factory=dict)
    health_at: float = float("-inf")
    spending: budget.Spending | None = None  # of ``spending_of`` (None: no cap)
    spending_of: str = ""  # the job whose budget.json was read
    master: JobState | None = None  # the job on the master: its state and sizes

    HEALTH_EVERY = 60.0  # seconds: `nvidia-smi -q` and the kernel log are slower to read

    def read(self) -> None:
        health = self.clock() - self.health_at >= self.HEALTH_EVERY
        self.health_at = self.clock() if health else self.health_at
        calls = {t.hop.label: observer_call("observe", *self.words(t.node.index or 0),
                                            *(["--health"] if health else []))
                 for t in self.jc.targets}
        try:
            group = self.jc.run(self.jc.targets, calls, timeout=60, warn=True)
        except GroupError as exc:  # warn: each node's failure stays in its result
            group = exc.group
        answers = {}
        for target in self.jc.targets:
            index, result = target.node.index or 0, group[target.hop.label]
            name = self.jc.node_name(index)
            if not result.ok or not result.stdout.strip():
                self.errors[index] = unreadable(name, result) or \
                    (result.error or "no answer").splitlines()[0]
                continue
            try:
                answers[index] = Frame.from_json(
                    json.loads(result.stdout.strip().splitlines()[-1]),
                    f"{name}: observer frame")
            except ValueError as exc:  # not JSON, or a WireError (naming the node)
                self.errors[index] = str(exc).splitlines()[0]
                continue
            self.errors.pop(index, None)
        self.job_id = self.job_id or ((answers[0].job_id or "") if 0 in answers else "")
        for index, answer in answers.items():
            self.take(index, answer)

    def words(self, index: int) -> list[str]:
        seen = self.windows.get(index)
        since = seen[-1]["t"] if seen else 0.0
        job = ["--job", self.job_id] if self.job_id else []
        return [*job, "--since", repr(since), "--last", str(FIRST_READ if not seen else 10_000)]

    def take(self, index: int, answer: Frame) -> None:
        if answer.job_id != self.job_id:  # this node's newest is another job
            return
        if index == 0 and answer.state is not None:
            try:  # the master's state.json, as the follower's is read
                self.master = jobfiles.state_of(answer.state, self.jc.node_name(0))
            except ClusterkitError as exc:  # a newer supervisor's: said in its row
                self.errors[0] = str(exc).splitlines()[0]
        kept = self.windows.setdefault(index, []) + [s.to_json() for s in answer.samples]
        start = kept[-1]["t"] - WINDOW if kept else 0.0
        self.windows[index] = [s for s in kept if s["t"] >= start]
        found = answer.health
        if found is not None:
            self.health[index] = diagnose.NodeHealth(smi_q=found.get("smi_q"),
                                                     kernel_log=found.get("kernel_log"))

    def frame(self) -> TopFrame:
        self.read()
        if not self.job_id:
            raise ClusterkitError(f"no job on cluster {self.jc.name}",
                                  "`clusterkit train <spec>` starts one")
        rows = []
        for target in self.jc.targets:
            index = target.node.index or 0
            row = row_of(self.jc.node_name(index), index, self.windows.get(index, []))
            if index in self.errors:
                row = NodeRow(row.node, index, error=self.errors[index])
            rows.append(row)
        findings = diagnose.diagnose(self.windows, context_of(self.jc, self.clock(),
                                                              self.health))
        note = "" if any(r.gpus for r in rows) else (
            "no GPU reported (no nvidia-smi on the nodes: the sandbox has no GPU)")
        spent = self.spent(max((r.at for r in rows if r.at is not None), default=None))
        master = self.master
        ended = master.updated if master is not None and master.state.final else None
        return TopFrame(self.jc.name, self.job_id, self.clock(), tuple(rows),
                        tuple(findings), note, spent.to_json() if spent else None,
                        spent.line() if spent else "",
                        master.sizes if master is not None else (), ended)

    def spent(self, at: float | None) -> Status | None:
        """The job's spend against its cap (``cluster/jobs/budget.py``: the master's
        budget.json, read once per job; the running nodes seen each frame) up to the
        newest sample (``at``: the samplers stop with the job, so does the count); None:
        no cap."""
        if self.spending_of != self.job_id:
            self.spending_of = self.job_id
            self.spending = budget.Spending.resume(self.jc, self.job_id)
        return self.spending.observe(self.jc, at) if self.spending is not None else None


@contextlib.contextmanager
def open_top(target: str, *, job_id: str | None = None, region: str | None = None,
             profile: str | None = None, rt: Runtime | None = None) -> Iterator[Top]:
    """The cluster's newest job (or ``job_id``) ready for frames, its connections open
    until the block ends (one SSH handshake per node for every frame; the first frame
    finds the newest job in the same call)."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, target, region)
    with Connections(jc.login, jc.targets) as pool:
        yield Top(dataclasses.replace(jc, pool=pool), job_id or "")


def context_of(jc: JobCluster, now: float | None = None,
               health: Mapping[int, diagnose.NodeHealth] | None = None) -> diagnose.Context:
    """What the diagnosis knows of the cluster: its type's vCPUs, GPUs and bandwidth
    (catalog), the framework, train.stall_after, and what each node's GPU health says."""
    node = jc.nodes[0]
    itype = instance_type(node.instance_type)
    train = jc.spec.train if jc.spec is not None else None
    return diagnose.Context(
        instance_type=node.instance_type, vcpus=itype.vcpus if itype else 0,
        gpus=itype.gpu_count if itype else 0,
        network_gbps=(itype.network_gbps if itype else None) or 0.0,
        framework=train.framework if train else "mxnet",
        stall_after=train.stall_after if train else 600.0, now=now,
        health=dict(health or {}), dataset_lazy=lazy_clone(jc))


def lazy_clone(jc: JobCluster) -> bool:
    """The nodes' dataset volume is a snapshot clone made without an initialization
    rate: its blocks load from S3 on first read (unless `deploy-dataset --prewarm` ran)."""
    dataset = jc.spec.storage.dataset if jc.spec is not None else None
    return bool(dataset and dataset.snapshot and not dataset.initialization_rate)


@dataclass
class FindingsTeller:
    """`train`'s diagnosis while it follows a job: each node's samples (the follower's
    ``M`` lines) kept for ``WINDOW`` s, diagnosed at most every ``EVERY`` s, and each
    kind of finding said once, when it first appears (healthy is not said)."""

    jc: JobCluster
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    windows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    told: dict[str, diagnose.Finding] = field(default_factory=dict)
    last: float = float("-inf")
    unreadable: set[int] = field(default_factory=set)  # nodes whose samples are newer

    EVERY = 10.0

    def add(self, index: int, sample: dict[str, Any]) -> None:
        try:  # the follower passes the node's lines on as they are
            sample = Sample.from_json(sample, f"{self.jc.node_name(index)}: {SAMPLES}").to_json()
        except WireError as exc:  # a newer sampler's: said once per node, not diagnosed
            if index not in self.unreadable:
                self.unreadable.add(index)
                self.say(f"[diagnosis] not diagnosed: {exc}")
            return
        kept = self.windows.setdefault(index, [])
        kept.append(sample)
        while kept and kept[0]["t"] < sample["t"] - WINDOW:
            kept.pop(0)
        if self.clock() - self.last < self.EVERY:
            return
        self.last = self.clock()
        for finding in diagnose.diagnose(self.windows, context_of(self.jc)):
            if finding.kind is diagnose.Kind.HEALTHY or finding.kind.value in self.told:
                continue
            self.told[finding.kind.value] = finding
            nodes = ", ".join(self.jc.node_name(i) for i in finding.nodes)
            self.say(f"[diagnosis] {finding.severity.value}: {finding.kind.value} on "
                     f"{nodes}: {finding.evidence}; fix: {finding.fix}")
