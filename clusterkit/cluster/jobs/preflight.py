"""`clusterkit train --preflight` (or ``train.preflight: true``): every node checked
before the job starts, and a node that fails replaced first.

1. every node's facts gathered at once, one SSH call each, as root
   (``training/preflight_facts.py``) and judged against what its instance type should
   have (``training/preflight.py``); each node's verdict said;
2. nodes that failed, while recoveries are left (``train.max_recoveries`` /
   ``--max-recoveries``: a preflight replacement uses one, as a job's recovery does),
   are replaced as a job's unhealthy node is (``recovery.replace_lost``: terminated,
   `up` of the missing indexes, bootstrapped, their dataset deployed) and the check runs
   again on the new ones; with none left, `train` stops (exit 1) naming each node, its
   evidence and what it costs to keep;
3. once every node passed, with several nodes and torch in the job's interpreter, a
   short all-reduce across them (`--nccl-test`'s machinery: ``nccltest.measure``)
   weighed against the type's nominal bandwidth. A test process that failed names its
   node (replaced like one that failed a check); a bandwidth short of EFA's, which no
   one node can be blamed for, stops `train` naming the cluster and its cost.

The record (``Preflight``) goes into the job's outcome and report."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from clusterkit.bootstrap.nodefact import NodeFact
from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.access.remote_ops import cluster_nodes, login_for
from clusterkit.cluster.jobs import nccltest, recovery, transport
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.attempt import Job
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.top import lazy_clone
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.plan.cost import cluster_hourly
from clusterkit.plan.nodes import Node
from clusterkit.plan.recovery import Loss, LossReason, Recovery
from clusterkit.remote.channels import Call
from clusterkit.remote.connect import Target
from clusterkit.training import preflight as pre
from clusterkit.training import preflight_facts as pf
from clusterkit.training import topology

JOB = "preflight"  # what a preflight replacement's record names as the job that lost it
# every fact's own bound, and the SSH call's on top
TIMEOUT = pf.SMI_TIMEOUT_S + pf.DCGM_TIMEOUT_S + pf.READ_TIMEOUT_S + 60
GP3_BASELINE_MIB_S = 125.0


@dataclass(frozen=True)
class Checked:
    """The preflight's record, the replacements it made (each uses a recovery) and
    the cluster as it now is."""

    record: pre.Preflight
    recoveries: tuple[Recovery, ...]
    cluster: JobCluster


def expect_of(jc: JobCluster, node: Node) -> pre.Expect:
    """What ``node`` should have: its type's GPUs and EFA (as the spec uses EFA), the
    spec's dataset and its provisioned throughput."""
    itype = instance_type(node.instance_type)
    efa = transport.expected_efa(jc.spec, node.instance_type)
    why = (f"network.efa: false ({node.instance_type} has {itype.efa_interfaces})"
           if itype is not None and itype.efa_interfaces and not efa else "")
    dataset = jc.spec.storage.dataset if jc.spec is not None else None
    return pre.Expect(node.instance_type, itype.gpu_count if itype else 0, efa, why,
                      dataset.mount if dataset else None,
                      float(dataset.throughput or GP3_BASELINE_MIB_S) if dataset else
                      GP3_BASELINE_MIB_S, lazy_clone(jc))


def say(rt: Runtime, text: str, bad: bool) -> None:
    """A verdict's line: a warning when it failed."""
    if bad:
        rt.warn(text, stage=Stage.TRAIN)
    else:
        rt.done(Stage.TRAIN, text)


def facts_of(jc: JobCluster) -> tuple[NodeFact[Any], ...]:
    assert jc.spec is not None and jc.spec.train is not None
    dataset = jc.spec.storage.dataset
    return pf.preflight_facts(dataset.mount if dataset else None,
                              topology.python_argv(jc.spec.train))


def check_nodes(rt: Runtime, jc: JobCluster, targets: Sequence[Target],
                ) -> tuple[tuple[pre.NodeCheck, ...], bool]:
    """Every node of ``targets`` checked at once: its verdicts, each said; and whether
    the job's interpreter has torch there (every node: for the all-reduce)."""
    facts = facts_of(jc)
    rt.started(Stage.TRAIN, f"preflight: checking {len(targets)} node(s) (GPUs, DCGM, "
               "EFA, dataset)")
    calls = {t.hop.label: Call(pf.gather(facts)) for t in targets}
    group = jc.run(targets, calls, timeout=TIMEOUT)
    checks, torch = [], True
    for target in targets:
        parsed = pf.parse_node(group[target.hop.label].stdout.splitlines(), facts)
        index = target.node.index or 0
        check = pre.NodeCheck(index, jc.node_name(index), target.node.instance_id,
                              pre.judge_node(parsed, expect_of(jc, target.node)))
        torch = torch and pf.has_torch(parsed)
        say(rt, f"preflight: {pre.node_line(check)}", bool(check.failed))
        checks.append(check)
    return tuple(checks), bool(torch)


def replace_failed(rt: Runtime, job: Job, failed: Sequence[pre.NodeCheck], number: int,
                   limit: int) -> Recovery:
    """The failed nodes replaced as a job's unhealthy ones are."""
    _, regions = login_for(job.spec_file, job.region)
    nodes = cluster_nodes(rt, job.spec.name, regions)
    now = time.time()
    loss = Loss({c.index: LossReason.UNHEALTHY for c in failed}, now, now)
    return recovery.replace_lost(rt, job, nodes, loss, JOB, number, limit)


def replaced_line(done: Recovery) -> str:
    """``worker-1 i-0ab… -> i-0cd… (unhealthy)``."""
    return ", ".join(f"{name} {' -> '.join(ids)} ({done.lost.get(name, '')})"
                     for name, ids in sorted(done.replaced.items()))


def cost_words(nodes: Sequence[Node]) -> str:
    hourly = cluster_hourly(list(nodes))
    return f"${hourly:.2f}/h" if hourly is not None else "an unknown price"


def given_up(jc: JobCluster, failed: Sequence[pre.NodeCheck], done: int, limit: int,
             spec_file: str) -> ClusterkitError:
    """`train`'s error when nodes failed and no recovery is left: each node, its
    evidence, and what keeping it costs."""
    names = ", ".join(f"{c.name} ({c.instance_id})" for c in failed)
    keep = [n for n in jc.nodes if (n.index or 0) in {c.index for c in failed}]
    used = f"{done} of {limit} used" if limit else "none allowed"
    lines = [f"preflight: {names} failed; no recovery left to replace "
             f"{'it' if len(failed) == 1 else 'them'} ({used}: train.max_recoveries / "
             "--max-recoveries): the job was not started"]
    lines += [f"  {c.name}: {c.evidence()}" for c in failed]
    return ClusterkitError("\n".join(lines), (
        f"keeping {names} costs {cost_words(keep)} (the cluster {cost_words(jc.nodes)}): "
        f"replace {'it' if len(failed) == 1 else 'them'} with `clusterkit train {spec_file} "
        f"--preflight --max-recoveries 1`, or remove the cluster: `clusterkit down "
        f"{jc.name}`"))


def all_reduce(rt: Runtime, job: Job, jc: JobCluster, torch: bool, out: TextIO | None,
               replace: bool = False) -> tuple[pre.Verdict | None, pre.NodeCheck | None]:
    """The all-reduce's verdict (SKIPPED: not run, said why) and, when its test failed
    on a node, that node as a failed check. ``replace``: a job running on the cluster is
    stopped first (`train --replace`), else it stops the test."""
    if len(jc.nodes) < 2 or not torch:
        why = ("one node: no network between nodes to measure" if len(jc.nodes) < 2 else
               "no torch in the job's interpreter on the nodes (train.python / "
               "train.packages): the all-reduce test runs under torchrun")
        rt.info(f"preflight: all-reduce not run: {why}", stage=Stage.TRAIN)
        return pre.Verdict(pre.Check.ALL_REDUCE, pre.Status.SKIPPED, why), None
    test = nccltest.measure(rt, jc, nccltest.nccl_command(None), replace=replace, out=out,
                            reopen=lambda: jobs.open_job_cluster(rt, job.spec_file,
                                                                 job.region))
    failed = test.outcome.failed
    if not test.outcome.ok and failed is not None:
        node = next((n for n in jc.nodes if jc.node_name(n.index or 0) == failed.node),
                    jc.nodes[0])
        tail = f": {' | '.join(failed.tail[-3:])}" if failed.tail else ""
        verdict = pre.Verdict(pre.Check.ALL_REDUCE, pre.Status.FAIL,
                              f"the all-reduce test: {failed.describe()}{tail}")
        return verdict, pre.NodeCheck(node.index or 0, failed.node, node.instance_id,
                                      (verdict,))
    if not test.outcome.ok:  # stopped off EFA (transport.py), or ended without a cause
        verdict = pre.Verdict(pre.Check.ALL_REDUCE, pre.Status.FAIL, "the all-reduce test "
                              f"{test.outcome.state.value}: {test.outcome.reason or '-'}")
    else:
        verdict = pre.judge_all_reduce(test.verdict, test.efa)
    say(rt, f"preflight: all-reduce {verdict.status.value}: {verdict.evidence}",
        verdict.status is pre.Status.FAIL)
    return verdict, None


def run(rt: Runtime, job: Job, jc: JobCluster, limit: int, out: TextIO | None = None,
        replace: bool = False) -> Checked:
    """The preflight (steps 1 to 3 above); raises when nodes fail with no recovery left
    or the all-reduce falls short of EFA. ``replace``: `train --replace`."""
    rounds: list[tuple[pre.NodeCheck, ...]] = []
    done: list[Recovery] = []
    if jc.cached:  # the nodes `up` last saw: asked of AWS, as a replacement would be
        jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
    targets, torch = list(jc.targets), True
    while True:
        checks, torch_here = check_nodes(rt, jc, targets)  # a node not answering: raises
        torch = torch and torch_here  # every node checked so far (the old ones kept)
        rounds.append(checks)
        failed = pre.failed_nodes(checks)
        reduce_verdict = None
        if not failed:
            reduce_verdict, culprit = all_reduce(rt, job, jc, torch, out, replace)
            failed = (culprit,) if culprit else ()
        if not failed:
            break
        if len(done) >= limit:
            raise given_up(jc, failed, len(done), limit, job.spec_file)
        done.append(replace_failed(rt, job, failed, len(done) + 1, limit))
        jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
        again = {c.index for c in failed}
        targets = [t for t in jc.targets if (t.node.index or 0) in again]
    record = pre.Preflight(tuple(rounds), reduce_verdict,
                           tuple(replaced_line(r) for r in done))
    if reduce_verdict is not None and reduce_verdict.status is pre.Status.FAIL:
        raise ClusterkitError(
            f"preflight: the all-reduce across the {len(jc.nodes)} nodes falls short: "
            f"{reduce_verdict.evidence}; the job was not started",
            f"no one node is to blame: `clusterkit train {job.spec_file} --nccl-test` "
            f"measures it again; the cluster costs {cost_words(jc.nodes)} while it runs "
            f"(`clusterkit down {jc.name}` removes it)")
    return Checked(record, tuple(done), jc)
