"""`clusterkit scaling SPEC --nodes 1,2,4`: the job run on the first k nodes of the
running cluster for each k (nothing relaunched), its steady-state throughput measured
from every node's sampler over ``duration`` seconds once each node printed a throughput,
then stopped; the table of ``training/scaling.py``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs import workdir
from clusterkit.cluster.jobs.attempt import Job, run_attempt, training_command
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.top import Top
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.events import Stage
from clusterkit.node.jobstate import JobStateName
from clusterkit.remote.fanout import Connections
from clusterkit.spec.model import Spec
from clusterkit.training import scaling

FIRST_RATE_WAIT = 300.0  # seconds for every node's first throughput line (--rate-wait)
RATE_HINT = ("print a throughput line on every worker (MXNet's Speedometer: `Epoch[0] "
             "Batch [0-50]\tSpeed: 1234.5 samples/sec`, or `N samples/s`), or set "
             "train.throughput_pattern to a regex whose one group captures your script's "
             "samples/s")
NO_RATE = ("no line matched `Speed: N samples/sec`, `N samples/s` or "
           "train.throughput_pattern")


@dataclass(frozen=True)
class ScalingResult:
    cluster: str
    duration: float
    rows: tuple[scaling.Row, ...]
    jobs: tuple[str, ...]  # the job of each run, in the rows' order
    input_only: bool = False  # the input pipeline alone (--io-only)


def first_nodes(jc: JobCluster, count: int) -> JobCluster:
    """The cluster cut to its first ``count`` nodes (the master first)."""
    return dataclasses.replace(jc, nodes=jc.nodes[:count], targets=jc.targets[:count],
                               pool=None)


def rated(top: Top) -> list[str]:
    """The nodes (master, worker-N) whose samples hold a throughput so far."""
    return [top.jc.node_name(t.node.index or 0) for t in top.jc.targets
            if any(s.get("samples_per_s") for s in top.windows.get(t.node.index or 0, []))]


def job_ended(jc: JobCluster, job_id: str) -> JobStateName | None:
    """The job's final state on the first node where it ended (a job ends everywhere
    once one node's does: fail-fast, or every worker done); None while it runs."""
    for states in jobs.node_jobs(jc).values():
        found = jobs.job_on(states, job_id)
        if found is not None and found.state.final:
            return found.state
    return None


def wait_first_rates(rt: Runtime, top: Top, wait: float,
                     ended: Callable[[], JobStateName | None]) -> None:
    """Until every node printed a throughput; a job that ends first, or ``wait`` s
    without every node's, is a ClusterkitError at once (naming throughput_pattern)."""
    total, deadline, seen = len(top.jc.targets), rt.clock() + wait, -1
    rt.info(f"scaling: waiting up to {wait:g} s for a throughput line from each of "
            f"{total} node(s)")
    while True:
        top.read()
        have = rated(top)
        if len(have) == total:
            return
        if len(have) != seen:
            seen = len(have)
            rt.info(f"scaling: {seen} of {total} node(s) printed a throughput so far")
        state = ended()
        if state is not None:
            top.read()  # what the job printed last
            if len(rated(top)) == total:
                return
            raise ClusterkitError(
                f"job {top.job_id} on {total} node(s) {state.value} before every node "
                f"printed a throughput ({_missing(top)}: {NO_RATE})",
                f"{RATE_HINT}; `clusterkit logs {top.jc.name} --job {top.job_id}` shows "
                "what it printed")
        if rt.clock() > deadline:
            raise ClusterkitError(
                f"no throughput from {_missing(top)} within {wait:g} s of job "
                f"{top.job_id}'s start ({NO_RATE})",
                f"{RATE_HINT}; a job slow to start: --rate-wait 10m")
        rt.sleep(rt.poll)


def _missing(top: Top) -> str:
    have = set(rated(top))
    return ", ".join(top.jc.node_name(t.node.index or 0) for t in top.jc.targets
                     if top.jc.node_name(t.node.index or 0) not in have)


def steady_rate(rt: Runtime, top: Top, duration: float, *, wait: float = FIRST_RATE_WAIT,
                ended: Callable[[], JobStateName | None] = lambda: None) -> float:
    """The cluster's samples/s over ``duration`` s from when every node has printed a
    throughput (``wait_first_rates``: a job that ends or stays silent fails at once)."""
    wait_first_rates(rt, top, wait, ended)
    start = max(s["t"] for w in top.windows.values() for s in w)
    rt.sleep(duration)
    top.read()
    total = 0.0
    for window in top.windows.values():
        rates = [s["samples_per_s"] for s in window
                 if s["t"] > start and s.get("samples_per_s") is not None]
        total += sum(rates) / len(rates) if rates else 0.0
    return total


def measure(rt: Runtime, job: Job, jc: JobCluster, count: int, duration: float,
            wait: float = FIRST_RATE_WAIT) -> tuple[scaling.Measure, str]:
    sub = first_nodes(jc, count)
    rt.started(Stage.TRAIN, f"scaling: the job on {count} node(s) for {duration:g} s")
    outcome = run_attempt(rt, job, sub, detach=True, replace=True)
    try:
        with Connections(sub.login, sub.targets) as pool:
            here = dataclasses.replace(sub, pool=pool)
            rate = steady_rate(rt, Top(here, outcome.job_id), duration, wait=wait,
                               ended=lambda: job_ended(here, outcome.job_id))
    finally:
        jobs.stop_job(sub, outcome.job_id)
    itype = instance_type(sub.nodes[0].instance_type)
    prices = [n.price for n in sub.nodes]
    hourly = None if any(p is None for p in prices) else sum(prices)  # type: ignore[arg-type]
    rt.done(Stage.TRAIN, f"scaling: {count} node(s): {rate:,.1f} samples/s")
    return scaling.Measure(count, count * (itype.gpu_count if itype else 0), rate,
                           hourly), outcome.job_id


IO_ONLY_ENV = "CLUSTERKIT_IO_ONLY"  # "1": the script runs its input pipeline alone


def io_only(spec: Spec, command: str, io_args: str) -> tuple[Spec, str]:
    """The job as `--io-only` runs it: every process gets CLUSTERKIT_IO_ONLY=1 (the
    script reads and decodes its data and trains nothing, printing its samples/s), and
    ``io_args`` go after the command (MXNet's image-classification scripts: --test-io 1)."""
    assert spec.train is not None
    env = MappingProxyType({**spec.train.env, IO_ONLY_ENV: "1"})
    train = dataclasses.replace(spec.train, env=env)
    return dataclasses.replace(spec, train=train), f"{command} {io_args}".strip()


def do_scaling(spec_file: str, nodes: Sequence[int], *, duration: float = 60.0,
               command: Sequence[str] = (), workdir_option: str | None = None,
               input_only: bool = False, io_args: str = "",
               rate_wait: float = FIRST_RATE_WAIT, region: str | None = None, profile: str | None = None,
               rt: Runtime | None = None) -> ScalingResult:
    """Each node count of ``nodes`` in turn (smallest first), on the running cluster;
    ``input_only``: the input pipeline alone (``io_only``); ``rate_wait``: seconds a run
    may go without every node's first throughput line before `scaling` fails."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, spec_file, region)
    spec = jc.spec
    if spec is None or spec.train is None:
        raise UsageError(f"{spec_file}: no train section", "give the cluster's spec file")
    counts = sorted(set(nodes))
    if not counts or counts[0] < 1 or counts[-1] > len(jc.nodes):
        raise UsageError(f"--nodes {','.join(map(str, nodes))}: the cluster has "
                         f"{len(jc.nodes)} running node(s)",
                         f"give counts from 1 to {len(jc.nodes)}, e.g. --nodes 1,2")
    text = training_command(spec, command)
    if input_only:
        spec, text = io_only(spec, text, io_args)
    job = Job(spec_file, spec, text, workdir.plan(spec, workdir_option), region)
    measures, job_ids = [], []
    for count in counts:
        made, job_id = measure(rt, job, jc, count, duration, rate_wait)
        measures.append(made)
        job_ids.append(job_id)
    if not any(m.samples_per_s for m in measures):
        raise ClusterkitError(f"no run measured a throughput over {duration:g} s ({NO_RATE} "
                              "after every node's first one)", RATE_HINT)
    return ScalingResult(jc.name, duration, tuple(scaling.rows(measures)), tuple(job_ids),
                         input_only)
