"""Replace only what a job lost, then start it again (``train.max_recoveries``).

When a job ends having lost nodes, on evidence only (a notice, an EC2 state or an impaired
status check, a node silent to the master for ``train.node_timeout`` and confirmed by
EC2: ``plan.evidence``, asked by ``lost_on_evidence``; each decision is logged with its
evidence, and a recovery's record keeps it), and recoveries are left:

1. the newest checkpoint's time is read on the master (when it survives and the spec
   names a ``train.checkpoint_dir`` on a file system), for the work lost;
2. the lost nodes' instances are terminated (a reclaimed one goes anyway; a silent one
   would bill on);
3. `up` of the spec, confirmed in advance by the recovery limit: observe, plan the
   missing indexes only (same AZ and type as the cluster first, then the confirmed
   fallback order, same names), apply; the surviving nodes keep their instances and
   their bootstrap receipts (only the hosts and known_hosts steps, whose inputs are the
   new addresses, run on them), the new ones are bootstrapped and get their dataset;
4. the job started again on every node with ``CLUSTERKIT_RESTART_COUNT`` and its record
   of every recovery (``plan.recovery.Recovery``: `status` shows it), and followed.

A job that failed on its own (a process exited non-zero) is not recovered: it would
only fail again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TextIO

from clusterkit.aws import instances
from clusterkit.aws.status_checks import status_checks
from clusterkit.bootstrap.steps import host_names
from clusterkit.cluster.access.remote_ops import cluster_members, login_for
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.attempt import Job, Restart, follow_job, run_attempt
from clusterkit.cluster.jobs.budget import Spending, reason_of
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.jobs.standby import Standbys, swap_in
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.kinds import InstanceState
from clusterkit.node.jobfile import RecoveryRecord
from clusterkit.node.jobstate import JobState, JobStateName
from clusterkit.plan.cost import cluster_hourly
from clusterkit.plan.evidence import Check, Ec2Seen, Verdict
from clusterkit.plan.nodes import Node
from clusterkit.plan.recovery import (
    Ending,
    Loss,
    LossReason,
    Recovery,
    job_record,
    recoveries_of,
    weigh,
)
from clusterkit.remote.address import targets as dial_targets
from clusterkit.remote.channels import Call
from clusterkit.training.budget import Decision

MASTER = 0


# One attempt's notice handler and what ends it (the recoveries it made meanwhile), given
# the recoveries made before and their limit: an elastic job's node that leaves is
# replaced while the attempt runs (``elastic.growth``).
Growth = Callable[[int, int], tuple[jobs.OnNotice | None, Callable[[], list[Recovery]]]]


def recover(rt: Runtime, job: Job, outcome: JobOutcome, *, limit: int,
            out: TextIO | None = None,
            confirm_stop: Callable[[str], bool] = lambda _job: True,
            standbys: Standbys | None = None, spending: Spending | None = None,
            growth: Growth | None = None) -> JobOutcome:
    """``outcome`` of a job that ended; while it lost nodes and ``limit`` allows, those
    nodes replaced and the job started again. The last outcome, with every recovery
    (those its record held before too: a job `train --attach` took over). A job whose
    spending cap (``spending``) leaves no room for a restart ends as ``budget``.
    ``growth``: each restart's notice handler (an elastic job's replacements), else the
    standbys'."""
    record = outcome.final.recovery if outcome.final is not None else RecoveryRecord()
    done = recoveries_of(record, outcome.final.started if outcome.final else None)
    first = record.first_job or outcome.job_id
    while True:
        seen = ec2_nodes(rt, job)
        if outcome.final is None and (seen is None or running_by_index(seen, 1)[MASTER]):
            outcome = _follow_again(rt, job, outcome, out, confirm_stop, standbys, spending)
            if outcome.final is None:
                return _unanswered(rt, outcome, done)
        loss, nodes = lost_on_evidence(rt, job, outcome.final, seen)
        if loss is None:
            return dataclasses.replace(outcome, recoveries=tuple(done))
        if len(done) >= limit:
            return _given_up(rt, job, outcome, loss, nodes, done, limit)
        if spending is not None and spending.status().decision is not Decision.UNDER:
            return _over_budget(rt, outcome, spending, done)
        done.append(replace_lost(rt, job, nodes, loss, outcome.job_id, len(done) + 1, limit,
                                 standbys))
        jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
        on_notice, grown = growth(len(done), limit) if growth is not None else (
            standbys.on_notice if standbys else None, list)
        outcome = run_attempt(rt, job, jc, replace=True, out=out, confirm_stop=confirm_stop,
                              restart=Restart(job_record(first, done, job.command)),
                              on_notice=on_notice, spending=spending)
        if outcome.final is not None and outcome.final.recovery.first_job:
            done = recoveries_of(outcome.final.recovery, outcome.final.started)
        done.extend(grown())


def _follow_again(rt: Runtime, job: Job, outcome: JobOutcome, out: TextIO | None,
                  confirm_stop: Callable[[str], bool],
                  standbys: Standbys | None, spending: Spending | None = None) -> JobOutcome:
    """The job followed again after its running master did not answer (as `train
    --attach` would), tried for ``train.node_timeout``: a follow that could not connect,
    or whose connection dropped before the master said how the job ended (the client's
    network still down), is tried again. The outcome as it was when the master still
    does not answer."""
    assert job.spec.train is not None
    deadline = rt.clock() + job.spec.train.node_timeout
    rt.warn(f"the master did not answer; following job {outcome.job_id} again",
            stage=Stage.TRAIN)
    while True:
        try:
            jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
            followed = follow_job(jc, outcome.job_id, out, confirm_stop,
                                  standbys.on_notice if standbys else None, spending=spending)
            if followed.final is not None:
                return followed
            why = "the connection dropped before it said how the job ended"
        except ClusterkitError as exc:
            why = str(exc)
        if rt.clock() >= deadline:
            rt.warn(f"the master still does not answer: {why}", stage=Stage.TRAIN)
            return outcome
        rt.sleep(max(rt.poll, 1.0))


def _unanswered(rt: Runtime, outcome: JobOutcome, done: Sequence[Recovery]) -> JobOutcome:
    """The outcome when the master runs and does not answer: nothing is replaced (the
    job may well run on)."""
    reason = ("the master runs but does not answer this client: the job may still run; "
              "`clusterkit train SPEC --attach` takes it over once it answers")
    rt.warn(reason, stage=Stage.TRAIN)
    return dataclasses.replace(outcome, reason=reason, recoveries=tuple(done))


def _over_budget(rt: Runtime, outcome: JobOutcome, spending: Spending,
                 done: Sequence[Recovery]) -> JobOutcome:
    """A job that lost nodes when its spending cap leaves no room for a restart: not
    replaced, ended as ``budget``."""
    reason = f"{reason_of(spending.status())}: no room left for a restart"
    rt.warn(reason, stage=Stage.TRAIN)
    return dataclasses.replace(outcome, state=JobStateName.BUDGET, reason=reason,
                               recoveries=tuple(done),
                               budget={**spending.status().to_json(), "acted": "stop"})


def count_standbys(spending: Spending | None, standbys: Standbys | None) -> None:
    """The standbys' spend counted against the job's cap (those ready: a booting one is
    counted from its launch once it is)."""
    if spending is not None and standbys is not None:
        spending.standbys = lambda: list(standbys.ready.values())


def ending(state: JobState | None) -> Ending | None:
    """How the job ended on the master, as ``find_loss`` reads it."""
    if state is None:
        return None
    failures = tuple(f for f in (state.failed, *state.others) if f is not None)
    return Ending(state.state, failures, state.interruption, state.updated)


@contextlib.contextmanager
def standbys_for(rt: Runtime, job: Job, limit: int) -> Iterator[Standbys | None]:
    """The job's standbys while it has recoveries left and the spec wants them
    (``train.prelaunch_on_rebalance``); those left are terminated at the end."""
    train = job.spec.train
    if not limit or train is None or not train.prelaunch_on_rebalance:
        yield None
        return
    standbys = Standbys(rt, job, minutes=train.standby_minutes)
    try:
        yield standbys
    finally:
        standbys.close()


def lost_on_evidence(rt: Runtime, job: Job, final: JobState | None,
                     nodes: list[Node] | None) -> tuple[Loss | None, list[Node]]:
    """What the job lost, on evidence (``plan.evidence``): a node silent to the master
    while EC2 does not answer is asked about again until ``train.node_timeout`` has
    passed (then it is kept: no evidence). Each decision that is not a plain "no
    evidence" is logged with its evidence. The loss and the cluster's nodes as last seen."""
    assert job.spec.train is not None
    timeout = job.spec.train.node_timeout
    deadline = rt.clock() + timeout
    while True:
        ec2 = ec2_view(nodes, job.spec.nodes.count, _status_checks(rt, nodes))
        loss, decisions = weigh(ending(final), ec2, time.time(), node_timeout=timeout)
        if rt.clock() >= deadline or all(d.verdict is not Verdict.UNCONFIRMED
                                         for d in decisions):
            break
        rt.sleep(max(rt.poll, 1.0))
        nodes = ec2_nodes(rt, job)
    for d in decisions:
        if d.verdict is not Verdict.KEPT or "no evidence" not in d.evidence:
            words = "lost" if d.verdict is Verdict.LOST else "not lost"
            rt.warn(f"{node_name(job, d.index)} {words}: {d.evidence}", stage=Stage.TRAIN)
    return loss, nodes or []


# The most alive of an index's instances first (a replacement beside its old instance).
_ALIVE = (InstanceState.RUNNING, InstanceState.PENDING, InstanceState.STOPPING,
          InstanceState.STOPPED, InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED)


def ec2_view(nodes: Sequence[Node] | None, count: int,
             checks: Mapping[str, str] | None = None) -> dict[int, Ec2Seen] | None:
    """Node index -> what EC2 lists for it: its most alive instance's state and status
    check (``checks``: instance id -> DescribeInstanceStatus' worse check; a value not
    there, or not one EC2 defines, is unknown: no evidence); None when EC2 did not
    answer."""
    if nodes is None:
        return None
    return {i: _seen_of(n, checks or {}) for i, n in
            ((i, most_alive(nodes).get(i)) for i in range(count))}


def most_alive(nodes: Sequence[Node]) -> dict[int, Node]:
    """Node index -> its most alive instance (``_ALIVE``'s order)."""
    best: dict[int, Node] = {}
    for n in nodes:
        if n.index is not None and (n.index not in best or
                                    _rank(n.state) < _rank(best[n.index].state)):
            best[n.index] = n
    return best


def _seen_of(node: Node | None, checks: Mapping[str, str]) -> Ec2Seen:
    if node is None:
        return Ec2Seen(None)
    check = checks.get(node.instance_id)
    return Ec2Seen(InstanceState(node.state) if node.state in _ALIVE else None,
                   Check(check) if check in tuple(Check) else None)


def _status_checks(rt: Runtime, nodes: Sequence[Node] | None) -> dict[str, str]:
    """The running nodes' status checks; none when EC2 does not answer (said once)."""
    found: dict[str, str] = {}
    running = [n for n in nodes or () if n.state == InstanceState.RUNNING]
    for region in sorted({n.region for n in running}):
        try:
            found.update(status_checks(rt.session, region, [
                n.instance_id for n in running if n.region == region]))
        except ClusterkitError as exc:
            rt.warn(f"EC2's status checks are unknown: {exc}", stage=Stage.TRAIN)
    return found


def _rank(state: str) -> int:
    return _ALIVE.index(InstanceState(state)) if state in _ALIVE else len(_ALIVE)


def running_by_index(nodes: Sequence[Node], count: int) -> dict[int, bool]:
    """Node index -> whether an instance of that index runs."""
    return {i: any(n.index == i and n.state == InstanceState.RUNNING for n in nodes)
            for i in range(count)}


def ec2_nodes(rt: Runtime, job: Job) -> list[Node] | None:
    """The cluster's nodes as EC2 lists them; None when EC2 did not answer (no evidence
    of anything: a node is never lost for it)."""
    _, regions = login_for(job.spec_file, job.region)
    try:
        return cluster_members(rt, job.spec.name, regions)  # empty: every node gone
    except ClusterkitError as exc:  # an AWS error, the endpoint down: not "every node gone"
        rt.warn(f"EC2 did not answer: {exc}", stage=Stage.TRAIN)
        return None


def _lost_words(job: Job, loss: Loss) -> str:
    evidence = loss.evidence()
    return ", ".join(f"{node_name(job, i)} ({why}{': ' + evidence[i] if i in evidence else ''})"
                     for i, why in sorted(loss.nodes.items()))


def node_name(job: Job, index: int) -> str:
    return host_names(job.spec.name, index)[1]


def replace_lost(rt: Runtime, job: Job, nodes: Sequence[Node], loss: Loss, job_id: str,
                 number: int, limit: int, standbys: Standbys | None = None) -> Recovery:
    """The lost nodes terminated and replaced (step 1 to 3 above): by their standbys
    where there are, else launched by `up`; the recovery's record, not yet running."""
    from clusterkit.cluster.provision.up import up

    rt.warn(f"job {job_id} lost {_lost_words(job, loss)}: replacing only "
            f"{'that node' if len(loss.nodes) == 1 else 'those nodes'} "
            f"(recovery {number} of {limit})", stage=Stage.TRAIN)
    checkpoint = last_checkpoint(rt, job, nodes, loss)
    going = [n for n in nodes if n.index in loss.nodes and n.holds_index]
    for region in sorted({n.region for n in going}):
        ids = [n.instance_id for n in going if n.region == region]
        rt.started(Stage.TERMINATE, f"terminating the lost node(s): {', '.join(ids)}")
        instances.terminate_instances(rt.session, region, ids)
    swapped = [i for i in sorted(loss.nodes) if standbys is not None and _swap(
        rt, job, standbys, i)]
    result = up(rt, job.spec, yes=True)
    now = {n.index: n.instance_id for n in result.nodes}
    old = {n.index: n.instance_id for n in going}
    return Recovery(
        number, {node_name(job, i): why.value for i, why in loss.nodes.items()},
        {node_name(job, i): (old.get(i, ""), now.get(i, "")) for i in loss.nodes},
        since=loss.since, stopped=loss.stopped, job=job_id,
        node_count=job.spec.nodes.count, last_checkpoint=checkpoint,
        hourly_usd=result.hourly_usd, from_standby=tuple(node_name(job, i) for i in swapped),
        evidence={node_name(job, i): words for i, words in loss.evidence().items()})


def _swap(rt: Runtime, job: Job, standbys: Standbys, index: int) -> bool:
    """Node ``index``'s standby swapped in; False when it has none."""
    standby = standbys.take(index)
    if standby is None:
        return False
    swap_in(rt, standby, job.spec.name, index)
    return True


def newest_file_command(directory: str) -> str:
    """Prints the newest file's mtime (epoch seconds) under ``directory`` (two levels:
    a checkpoint may be a dir of shards), nothing when there is none."""
    path = '"$HOME"' + shlex.quote(directory[1:]) if directory.startswith("~") \
        else shlex.quote(directory)
    return (f"find {path} -maxdepth 2 -type f ! -name '.*' -printf '%T@\\n' 2>/dev/null "
            "| sort -n | tail -n 1")


def last_checkpoint(rt: Runtime, job: Job, nodes: Sequence[Node], loss: Loss) -> float | None:
    """When the newest checkpoint was written, read on the surviving master; None when
    there is no file-system checkpoint dir, no surviving master or no checkpoint."""
    train = job.spec.train
    where = train.checkpoint_dir if train else None
    master = next((n for n in nodes if n.index == MASTER and
                   n.state == InstanceState.RUNNING), None)
    if not where or where.startswith("s3://") or MASTER in loss.nodes or master is None:
        return None
    login, _ = login_for(job.spec_file, job.region)
    jc = JobCluster(job.spec.name, job.spec, login, [master], dial_targets(nodes, [master]))
    try:
        group = jc.run(jc.targets, {jc.master.hop.label: Call(newest_file_command(where))},
                       timeout=30)
        text = next(iter(group.values())).stdout.strip()
        return float(text) if text else None
    except (ClusterkitError, ValueError) as exc:
        rt.warn(f"the newest checkpoint's time is unknown: {exc}", stage=Stage.TRAIN)
        return None


def _given_up(rt: Runtime, job: Job, outcome: JobOutcome, loss: Loss,
              nodes: Sequence[Node], done: Sequence[Recovery], limit: int) -> JobOutcome:
    """The outcome of a job that lost nodes with no recovery left; lost nodes that still
    run (and bill) are named, with their cost and how to replace them."""
    still = [n for n in nodes if n.index in loss.nodes and n.state == InstanceState.RUNNING
             and loss.nodes[n.index] in (LossReason.UNREACHABLE, LossReason.UNHEALTHY,
                                         LossReason.IMPAIRED)]
    if still:
        hourly = cluster_hourly(still)
        cost = f" (${hourly:.2f}/h)" if hourly is not None else ""
        names = ", ".join(f"{node_name(job, n.index or 0)} ({n.instance_id})" for n in still)
        rt.warn(f"{names} still run{cost}, lost to the job; `clusterkit down "
                f"{job.spec.name}` removes the cluster", stage=Stage.TRAIN)
    used = f"{len(done)} of {limit}" if limit else "none allowed"
    reason = (f"{outcome.reason or outcome.state.value}; lost {_lost_words(job, loss)}, "
              f"no recovery left ({used}: train.max_recoveries / --max-recoveries)")
    return dataclasses.replace(outcome, reason=reason, recoveries=tuple(done))
