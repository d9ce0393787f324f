"""`clusterkit train SPEC --attach`: take over a running job from any terminal: follow
its logs as `train` does and, when it loses nodes, recover it as `train` would have
(``cluster/jobs/recovery.py``), with the recoveries its record already holds counted
against the limit. The command it restarts is the one the job's record keeps; the
workdir is synced again from ``--workdir`` (or the spec's) when a restart needs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TextIO

from clusterkit.cluster.jobs import budget, controller, elastic, workdir
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.attempt import Job, follow_job
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.events import Stage
from clusterkit.node.jobstate import JobStateName
from clusterkit.remote.incluster import controller_key


def do_attach(spec_file: str, *, job_id: str | None = None,
              workdir_option: str | None = None, out: TextIO | None = None,
              confirm_stop: Callable[[str], bool] = lambda _job: True,
              region: str | None = None, profile: str | None = None,
              max_recoveries: int | None = None, rt: Runtime | None = None,
              node_workdir: str | None = None) -> JobOutcome:
    """Follow the cluster's newest job (or ``job_id``) until it ends, recovering it as
    `train` does; a job that already ended is recovered at once when it lost nodes.
    ``node_workdir``: the code is there on the nodes (nothing synced: the master's
    controller). While the master's controller runs, the job is followed only."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, spec_file, region)
    spec = jc.spec
    if spec is None or spec.train is None:
        raise UsageError(f"{spec_file}: no train section", "add `train:` to the spec")
    job_id, by_node = jobs.choose_job(jc, job_id)
    state = jobs.job_on(by_node.get(jc.master.hop.label, []), job_id)
    command = state.recovery.command if state else ""
    if not command:
        raise ClusterkitError(f"job {job_id} keeps no training command (started by an older "
                              "clusterkit)", "follow it with `clusterkit logs NAME -f`")
    rt.info(f"attached to job {job_id} on cluster {jc.name}", stage=Stage.TRAIN)
    from clusterkit.cluster.jobs import recovery

    job = Job(spec_file, spec, command,
              None if node_workdir else workdir.plan(spec, workdir_option), region,
              node_workdir)
    limit = spec.train.max_recoveries if max_recoveries is None else max_recoveries
    if limit and controller_key() is None and controller.alive(jc):
        rt.info("the recovery controller on the master recovers this job: following it "
                "only", stage=Stage.TRAIN)
        limit = 0
    spending = budget.Spending.resume(jc, job_id)  # the cap the job's start recorded
    with recovery.standbys_for(rt, job, limit) as standbys:
        recovery.count_standbys(spending, standbys)
        growth = elastic.growth(rt, job, standbys=standbys, out=out)  # a node that leaves
        on_notice, grown = growth(0, limit)
        outcome = follow_job(jc, job_id, out, confirm_stop, on_notice,
                             active=state is not None and state.state.active,
                             spending=spending)
        regrown = grown()
        if not (outcome.ok or outcome.detached or
                outcome.state in (JobStateName.STOPPED, JobStateName.BUDGET)):
            outcome = recovery.recover(rt, job, outcome, limit=limit - len(regrown), out=out,
                                       confirm_stop=confirm_stop, standbys=standbys,
                                       spending=spending, growth=growth)
    if regrown:
        outcome = dataclasses.replace(outcome, recoveries=(*regrown, *outcome.recoveries))
    from clusterkit.cluster.jobs import report

    return report.with_report(rt, outcome, spec_file, region)
