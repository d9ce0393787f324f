"""A cluster's training jobs as the client sees them, all from the nodes' own job dirs
(``/var/lib/clusterkit/jobs/<job-id>/``, kept by each node's supervisor): which jobs
there are and their state, their logs streamed live (``logs``, and `train` after the
start), and stopping one on every node (``stop``). Nothing is kept on this machine: any
terminal sees the same jobs.

Every node-side read runs ``node/follower.py`` (stdlib) sent over SSH stdin; stop
runs the job's own ``supervisor.py stop`` on every node at once.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from clusterkit.bootstrap.steps import host_names
from clusterkit.cluster.access import hostkeys, nodecache
from clusterkit.cluster.access.remote_ops import cluster_nodes, login_for, require_running
from clusterkit.cluster.jobs.results import (
    JobOutcome,
    JobSummary,
    NodeStop,
    StopResult,
    report_failures,
)
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.kinds import InstanceState
from clusterkit.node import bundle, paths
from clusterkit.node.jobstate import JobState, JobStateName
from clusterkit.node.nodestate import state_from
from clusterkit.node.totals import Summary
from clusterkit.plan.nodes import Node
from clusterkit.plan.recovery import recoveries_of
from clusterkit.remote import selection
from clusterkit.remote.address import ssh_address
from clusterkit.remote.address import targets as dial_targets
from clusterkit.remote.channels import Call, run_calls
from clusterkit.remote.connect import Login, Target
from clusterkit.remote.fanout import Connections
from clusterkit.remote.results import GroupResult
from clusterkit.spec.model import Spec
from clusterkit.training import jobfiles
from clusterkit.training.jobfiles import parse_state

JOBS_DIR = paths.JOBS_DIR
__all__ = ["JobOutcome", "StopResult", "JobSummary", "JobCluster", "do_stop", "do_logs",
           "job_summary", "open_job_cluster"]
OnNotice = Callable[[str, dict[str, Any]], None]  # node's short name, the notice
OnMetrics = Callable[[int, dict[str, Any]], None]  # node index, one metric sample
OnLine = Callable[[str, str], None]  # node's short name, one line of its processes' logs
TAIL_LINES = 20  # of the failed process's log shown with the failure
DRAIN_S = 2.0  # the other nodes' streams get this long to finish after the master's ends
# A kept node that does not answer this soon sends `train` to AWS (a reclaimed spot node).
CACHED_CONNECT_TIMEOUT = 5.0


def job_dir(job_id: str) -> str:
    """The job's dir on a node (the id checked first: it becomes a path)."""
    return jobfiles.job_dir(job_id, root="")


def node_python() -> str:
    """The interpreter the node-side programs run under: the node's own, not the job's
    environment (the supervisor and follower are stdlib only)."""
    return "python3"


FOLLOWER_MODULES = bundle.FOLLOWER  # what the follower imports, sent before it


def follower_call(*args: str) -> Call:
    return Call(shlex.join([node_python(), "-", *args]),
                bundle.program("follower.py", FOLLOWER_MODULES))


@dataclass(frozen=True)
class JobCluster:
    """A cluster's running nodes, master first, ready to dial."""

    name: str
    spec: Spec | None
    login: Login
    nodes: list[Node]
    targets: list[Target]
    pool: Connections | None = None  # connections kept open for a run of several calls
    cached: bool = False  # the nodes `up` last saw (nodecache), not yet checked

    def run(self, targets: Sequence[Target], calls: Mapping[str, Call],
            **options: Any) -> GroupResult:
        """``run_calls`` on this cluster's login (and its pool, when it has one)."""
        return run_calls(self.login, targets, calls, pool=self.pool, **options)

    def short(self, label: str) -> str:
        """``master`` / ``worker-2`` for a target's label."""
        node = next(t.node for t in self.targets if t.hop.label == label)
        return self.node_name(node.index or 0)

    def node_name(self, index: int) -> str:
        """``master`` / ``worker-2`` for a node index."""
        return host_names(self.name, index)[1]

    def pick(self, selectors: Sequence[str]) -> list[Target]:
        chosen = {n.instance_id for n in selection.select(self.nodes, selectors)}
        return [t for t in self.targets if t.node.instance_id in chosen]

    @property
    def master(self) -> Target:
        return self.targets[0]


def open_job_cluster(rt: Runtime, target: str, region: str | None = None, *,
                 cached: bool = False) -> JobCluster:
    """NAME or spec file -> the cluster's nodes, every one running, host keys checked.
    ``cached``: the nodes kept by nodecache when there are any (and known_hosts), with
    ``JobCluster.cached`` set: the caller checks them on its first call
    (``cached_nodes_hold``) and comes back without ``cached`` when they do not hold."""
    login, regions = login_for(target, region)
    from clusterkit.cluster.access.target import open_cluster

    spec = open_cluster(target, region).spec
    kept = _kept_cluster(login, spec) if cached else None
    if kept is not None:
        return kept
    found = cluster_nodes(rt, login.cluster, regions)
    nodes = selection.ordered(found)
    require_running(found, nodes)
    if nodes[0].index != 0:
        raise ClusterkitError(f"cluster {login.cluster} has no master (index 0)",
                              "`clusterkit up <spec>` replaces it")
    hostkeys.prepare(rt, login.cluster, [n for n in nodes if n.state ==
                                         InstanceState.RUNNING], (), port=login.port,
                     first_contact=True)
    nodecache.save(login.cluster, found)
    return JobCluster(login.cluster, spec, login, nodes, dial_targets(found, nodes))


def _kept_cluster(login: Login, spec: Spec | None) -> JobCluster | None:
    """The cluster as nodecache kept it, marked ``cached``; None when nothing usable is
    kept (no list, no known_hosts, no master, an address the sandbox no longer maps)."""
    kept = nodecache.load(login.cluster)
    if kept is None or not login.known_hosts.is_file():
        return None
    nodes = selection.ordered(kept)
    if nodes[0].index != 0:
        return None
    try:
        targets = dial_targets(kept, nodes)
    except ClusterkitError:
        return None
    quick = dataclasses.replace(login, connect_timeout=min(login.connect_timeout,
                                                           CACHED_CONNECT_TIMEOUT))
    return JobCluster(login.cluster, spec, quick, nodes, targets, cached=True)


def cached_nodes_hold(jc: JobCluster, master_hosts: str) -> bool:
    """Whether the kept nodes of ``jc`` are the cluster: every node answered (each
    with its instance's pinned host key, which the caller's first call proved) and the
    master's /etc/hosts block, written by the last bootstrap of the whole cluster,
    names exactly these nodes at these addresses."""
    from clusterkit.bootstrap.facts import parse_hosts
    from clusterkit.bootstrap.steps import ClusterView, NodeView, hosts_block

    try:
        view = ClusterView(jc.name, "", tuple(NodeView(n.index or 0,
                                                       ssh_address(n, via_gateway=True), None)
                                              for n in jc.nodes))
    except (ValueError, ClusterkitError):  # indexes not 0..N-1, an address not mapped
        return False
    return parse_hosts(master_hosts.splitlines()).managed == tuple(hosts_block(view).splitlines())


# -- which jobs, in which state ------------------------------------------------------

def node_jobs(jc: JobCluster) -> dict[str, list[JobState]]:
    """label -> that node's jobs (state.json each, refreshed), oldest first."""
    group = jc.run(jc.targets, {t.hop.label: follower_call("jobs")
                                             for t in jc.targets}, timeout=60)
    return {label: [parse_state(line, f"node {label}") for line in r.stdout.splitlines()
                    if line.strip()]
            for label, r in group.items()}


def active_jobs(by_node: Mapping[str, Sequence[JobState]]) -> list[str]:
    """Job ids starting, running or stopping on any node, oldest first."""
    return sorted({j.job_id for jobs in by_node.values() for j in jobs if j.state.active})


def latest_job(by_node: Mapping[str, Sequence[JobState]]) -> str | None:
    """The newest job id on any node (job ids sort by their start time)."""
    ids = [j.job_id for jobs in by_node.values() for j in jobs]
    return max(ids) if ids else None


def job_on(jobs: Sequence[JobState], job_id: str) -> JobState | None:
    return next((j for j in jobs if j.job_id == job_id), None)


def choose_job(jc: JobCluster, job_id: str | None) -> tuple[str, dict[str, list[JobState]]]:
    by_node = node_jobs(jc)
    if job_id is None:
        job_id = latest_job(by_node)
        if job_id is None:
            raise ClusterkitError(f"no job on cluster {jc.name}",
                                  "`clusterkit train <spec>` starts one")
    elif not any(job_on(jobs, job_id) for jobs in by_node.values()):
        raise UsageError(f"no job {job_id} on cluster {jc.name}",
                         "`clusterkit status NAME` lists the cluster's jobs")
    return job_id, by_node


# -- stop ----------------------------------------------------------------------------

def stop_job(jc: JobCluster, job_id: str, grace: float | None = None) -> StopResult:
    """The job's supervisor ``stop`` on every node at once (SIGTERM, then the cgroup
    killed after the grace period; idempotent; a node without the job says so)."""
    d = job_dir(job_id)
    words = [node_python(), f"{d}/supervisor.py", "stop", d]
    if grace is not None:
        words += ["--grace", f"{grace:g}"]
    command = (f"if [ -f {shlex.quote(d)}/supervisor.py ]; then {shlex.join(words)}; "
               "else echo 'no such job here'; fi")
    group = jc.run(jc.targets, {t.hop.label: Call(command) for t in jc.targets},
                      timeout=120)
    return StopResult(jc.name, job_id, {jc.short(label): _node_stop(r.stdout)
                                        for label, r in group.items()}, group)


def _node_stop(text: str) -> NodeStop:
    """The supervisor's printed state (its last line), else its words as a message."""
    lines = text.strip().splitlines()
    if not lines:
        return NodeStop(None, "no answer")
    try:
        return NodeStop(parse_state(lines[-1]))
    except ClusterkitError:
        return NodeStop(None, text.strip())


def do_stop(target: str, *, job_id: str | None = None, grace: float | None = None,
            region: str | None = None, profile: str | None = None,
            rt: Runtime | None = None) -> StopResult:
    """Stop the cluster's running job (or ``job_id``) on every node; a job that has
    already ended (the newest one, when none runs) is left as it is and said so."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = open_job_cluster(rt, target, region)
    by_node = node_jobs(jc)
    if job_id is None:
        running = active_jobs(by_node)
        job_id = running[-1] if running else latest_job(by_node)
        if job_id is None:
            raise ClusterkitError(f"no job on cluster {jc.name}", "nothing to stop")
    ended = job_on(by_node.get(jc.master.hop.label, []), job_id)
    if job_id not in active_jobs(by_node) and ended is not None:
        return StopResult(jc.name, job_id, {}, already=ended)  # no supervisor asked
    return stop_job(jc, job_id, grace)


# -- logs ----------------------------------------------------------------------------

class LogPrinter:
    """The sink of every node's follower: ``[node/process] line`` on ``out``, the last
    lines of each process kept, each node's final state recorded."""

    def __init__(self, jc: JobCluster, out: TextIO | None, stop: threading.Event,
                 on_notice: OnNotice | None = None,
                 on_metrics: OnMetrics | None = None, on_line: OnLine | None = None) -> None:
        self.jc, self.out, self.stop, self.on_notice = jc, out, stop, on_notice
        self.on_metrics, self.on_line = on_metrics, on_line
        self.lock = threading.Lock()
        self.tails: dict[tuple[str, str], deque[str]] = {}
        self.states: dict[str, JobState] = {}
        self.totals: dict[int, Summary] = {}  # node index -> its totals at the job's end

    def __call__(self, label: str, line: str) -> None:
        node = self.jc.short(label)
        if line.startswith("S"):
            self._ended(label, node, line[1:])
            return
        if line.startswith("N"):
            self._notice(node, line[1:])
            return
        if line.startswith("M"):
            self._metrics(label, line[1:])
            return
        if line.startswith("T"):
            self._totals(label, node, line[1:])
            return
        name, _, text = line[1:].partition("\t")
        with self.lock:
            self.tails.setdefault((node, name), deque(maxlen=TAIL_LINES)).append(text)
            if self.out is not None:
                self.out.write(f"[{node}/{name}] {text}\n")
                self.out.flush()
            if self.on_line is not None:
                self.on_line(node, text)

    def _notice(self, node: str, text: str) -> None:
        """A spot notice a node's supervisor recorded (or its GPUs found unfit): said,
        and handed on."""
        try:
            notice = json.loads(text)
        except ValueError:
            return
        if self.out is not None:
            words = f"GPUs unfit: {notice.get('reason')}" if notice.get("kind") == "unfit" \
                else f"spot {notice.get('kind')} notice"
            with self.lock:
                self.out.write(f"[{node}] {words}\n")
        if self.on_notice is not None and isinstance(notice, dict):
            self.on_notice(node, notice)

    def _metrics(self, label: str, text: str) -> None:
        """A node's metric sample, handed on (with the node's index)."""
        if self.on_metrics is None:
            return
        try:
            sample = json.loads(text)
        except ValueError:
            return
        index = next(t.node.index or 0 for t in self.jc.targets if t.hop.label == label)
        if isinstance(sample, dict) and "t" in sample:
            with self.lock:
                self.on_metrics(index, sample)

    def _totals(self, label: str, node: str, text: str) -> None:
        """A node's running totals at the job's end (its summary.json): what the job's
        report is made of. One this client cannot read is left for the report to ask."""
        try:
            summary = Summary.from_json(json.loads(text), f"{node}: job totals")
        except ValueError:  # not JSON, or a WireError
            return
        index = next(t.node.index or 0 for t in self.jc.targets if t.hop.label == label)
        with self.lock:
            self.totals[index] = summary

    def _ended(self, label: str, node: str, text: str) -> None:
        try:
            self.states[node] = parse_state(text)
        except ClusterkitError:
            self.states[node] = unknown_state("")
        if label == self.jc.master.hop.label:
            drain = threading.Timer(DRAIN_S, self.stop.set)
            drain.daemon = True  # else the command waits it out before exiting
            drain.start()


def follow_logs(jc: JobCluster, job_id: str, *, keep_following: bool,
                chosen: Sequence[Target] | None = None, names: Sequence[str] = (),
                roles: Sequence[str] = (), out: TextIO | None = None,
                on_notice: OnNotice | None = None,
                on_metrics: OnMetrics | None = None, on_line: OnLine | None = None,
                stop: threading.Event | None = None) -> LogPrinter:
    """Stream the job's logs from ``chosen`` nodes (all by default) until the job has
    ended (``keep_following``) or what is there now has been printed; ``on_notice``
    gets each spot notice a node's supervisor records (its short name, the notice),
    ``on_metrics`` each metric sample its sampler writes meanwhile, ``on_line`` each log
    line (its node's short name, the text); setting ``stop`` ends the follow."""
    args = ["follow", job_dir(job_id), *(["--follow"] if keep_following else []),
            *(["--metrics"] if on_metrics is not None else [])]
    for name in names:
        args += ["--name", name]
    for role in roles:
        args += ["--role", role]
    stop = stop if stop is not None else threading.Event()
    printer = LogPrinter(jc, out, stop, on_notice, on_metrics, on_line)
    chosen = list(chosen if chosen is not None else jc.targets)
    jc.run(chosen, {t.hop.label: follower_call(*args) for t in chosen},
              sink=printer, stop=stop, warn=True)
    return printer


def unknown_state(job_id: str) -> JobState:
    """A job no node could say anything of."""
    return state_from({"job_id": job_id}, JobStateName.UNKNOWN)


def outcome(jc: JobCluster, job_id: str, printer: LogPrinter) -> JobOutcome:
    """The job's outcome from the master's final state (read again when the master's
    stream ended without one)."""
    final = printer.states.get("master")
    if final is None:
        try:
            final = job_on(node_jobs(jc).get(jc.master.hop.label, []), job_id)
        except ClusterkitError:  # the master does not answer (a lost master)
            final = None
    state = final or unknown_state(job_id)
    cause, others = report_failures(state, jc.node_name, printer.tails)
    return JobOutcome(jc.name, job_id, state.state, state.reason, cause, others,
                      final=final, totals=dict(printer.totals))


def do_logs(target: str, *, job_id: str | None = None, follow: bool = False,
            nodes: Sequence[str] = (), roles: Sequence[str] = (), out: TextIO | None = None,
            region: str | None = None, profile: str | None = None,
            rt: Runtime | None = None) -> JobOutcome:
    """Print the job's logs (the newest job unless ``job_id``) from every node, or the
    ``nodes`` / ``roles`` chosen; with ``follow`` until the job ends."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = open_job_cluster(rt, target, region)
    job_id, _ = choose_job(jc, job_id)
    printer = follow_logs(jc, job_id, keep_following=follow, chosen=jc.pick(nodes),
                          roles=roles, out=out)
    if not follow:
        state = job_on(node_jobs(jc).get(jc.master.hop.label, []), job_id)
        printer.states["master"] = state or unknown_state(job_id)
    return outcome(jc, job_id, printer)


def job_summary(rt: Runtime, cluster: str, region: str | None = None) -> JobSummary | None:
    """`status NAME`'s job section: the newest job, its state on the master, and every
    node's processes; None when there is none or the nodes cannot be read (status must
    answer without them)."""
    try:
        jc = open_job_cluster(rt, cluster, region)
        by_node = node_jobs(jc)
    except ClusterkitError:
        return None
    job_id = latest_job(by_node)
    if job_id is None:
        return None
    nodes = {jc.short(label): job_on(found, job_id) for label, found in by_node.items()}
    master = nodes.get("master") or unknown_state(job_id)
    cause, others = report_failures(master, jc.node_name)
    return JobSummary(job_id, master.state, master.reason, cause, others, nodes,
                      tuple(recoveries_of(master.recovery, master.started)))
