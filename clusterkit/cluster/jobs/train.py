"""`clusterkit train`, the command: one attempt of the job (``attempt.py``: the nodes
asked, the job started on every node and followed), the spot notices meanwhile turned
into standbys (``standby.py``), a job that lost nodes recovered (``recovery.py``) or, for
a detached one, the controller left on the master to do so (``controller.py``), and the
ended job's report (``report.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TextIO

from clusterkit.cluster.jobs import budget, controller, elastic, recovery, report, workdir
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.attempt import Job, run_attempt, training_command
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.node.jobstate import JobStateName


def do_train(spec_file: str, *, command: Sequence[str] = (), workdir_option: str | None = None,
             detach: bool = False, replace: bool = False, out: TextIO | None = None,
             confirm_stop: Callable[[str], bool] = lambda _job: True,
             region: str | None = None, profile: str | None = None,
             max_recoveries: int | None = None, preflight: bool = False,
             max_cost: float | None = None, rt: Runtime | None = None) -> JobOutcome:
    """Start the spec's job on every node of its running cluster; unless ``detach``,
    stream every log to ``out`` until it ends. On Ctrl-C, ``confirm_stop(job_id)``
    decides whether the job is stopped (True) or left running. A job that loses nodes
    is recovered up to ``max_recoveries`` times (default: the spec's
    ``train.max_recoveries``; ``cluster/jobs/recovery.py``); a detached one by the
    controller it leaves on the master (``cluster/jobs/controller.py``). With
    ``preflight`` (or ``train.preflight``) every node is checked first, and a failing one
    replaced while recoveries are left (``cluster/jobs/preflight.py``): each replacement
    uses one. ``max_cost`` (default ``train.max_cost``): the job's spending cap
    (``cluster/jobs/budget.py``), kept for a detached job by the controller."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, spec_file, region, cached=True)
    spec = jc.spec
    if spec is None or spec.train is None:
        raise UsageError(f"{spec_file}: no train section", "add `train:` to the spec")
    job = Job(spec_file, spec, training_command(spec, command),
              workdir.plan(spec, workdir_option), region)
    limit = spec.train.max_recoveries if max_recoveries is None else max_recoveries
    spending = budget.Spending.new(spec, budget.cap_of(spec, max_cost), jc.nodes)
    if detach and limit:
        controller.check(job.workdir.shared if job.workdir else None)
    checked = None
    if preflight or spec.train.preflight:
        from clusterkit.cluster.jobs import preflight as pre

        checked = pre.run(rt, job, jc, limit, out, replace)
        jc, limit = checked.cluster, limit - len(checked.recoveries)
        # the cap's ledger starts with the job, on the nodes it runs on (replacements too)
        spending = budget.Spending.new(spec, budget.cap_of(spec, max_cost), jc.nodes)
    with recovery.standbys_for(rt, job, limit if not detach else 0) as standbys:
        recovery.count_standbys(spending, standbys)
        growth = elastic.growth(rt, job, standbys=standbys, out=out)
        on_notice, grown = growth(0, 0 if detach else limit)
        outcome = run_attempt(rt, job, jc, detach=detach, replace=replace, out=out,
                              confirm_stop=confirm_stop, on_notice=on_notice,
                              spending=spending)
        regrown = grown()
        limit -= len(regrown)
        if detach and (limit or spending is not None):  # the controller keeps the cap
            controller.start(rt, jobs.open_job_cluster(rt, spec_file, region), spec_file,
                             outcome.job_id, limit, jc.nodes[0].region,
                             job.workdir.remote if job.workdir else None)
        if not (detach or outcome.ok or outcome.detached or
                outcome.state in (JobStateName.STOPPED, JobStateName.BUDGET)):
            outcome = recovery.recover(rt, job, outcome, limit=limit, out=out,
                                       confirm_stop=confirm_stop, standbys=standbys,
                                       spending=spending, growth=growth)
    if regrown:
        outcome = dataclasses.replace(outcome, recoveries=(*regrown, *outcome.recoveries))
    if checked is not None:
        outcome = dataclasses.replace(outcome, preflight=checked.record)
    return report.with_report(rt, outcome, spec_file, region)
