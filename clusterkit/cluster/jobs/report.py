"""A job's report (``training/report.py``), made once it ended: every node's running
totals (its supervisor's summary.json) read in one call per node (the observer's
``summary`` verb), priced with what the nodes were launched at, and kept on the master
as report.json in the job's directory (``keep``, its one writer), where `clusterkit job
NAME` reads it again (``summaries``, its one reader). A record of a newer version than
this client reads is a ClusterkitError naming the node, the file and both versions."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from clusterkit.catalog.prices import on_demand_price
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster, job_dir
from clusterkit.cluster.jobs.results import JobOutcome, recovery_json
from clusterkit.cluster.jobs.top import observer_call, unreadable
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError
from clusterkit.events import Stage
from clusterkit.node.frames import SummaryFrame
from clusterkit.node.jobstate import JobState
from clusterkit.node.wire import WireError
from clusterkit.plan.recovery import Recovery, recoveries_of
from clusterkit.remote.channels import Call
from clusterkit.training import report

REPORT = "report.json"  # in the job's directory on the master
UNREADABLE_HINT = "a newer clusterkit started this job: read its report with that version"


def summaries(jc: JobCluster, job_id: str) -> dict[int, SummaryFrame]:
    """Node index -> the observer's ``summary`` answer (totals, and on the master the
    report kept); a node that does not answer is left out, one whose records are newer
    than this client reads is a ClusterkitError."""
    calls = {t.hop.label: observer_call("summary", job_dir(job_id), "--report", REPORT)
             for t in jc.targets}
    try:
        group = jc.run(jc.targets, calls, timeout=30, warn=True)
    except GroupError as exc:
        group = exc.group
    found = {}
    for target in jc.targets:
        index, result = target.node.index or 0, group[target.hop.label]
        name = jc.node_name(index)
        refused = unreadable(name, result)
        if refused:
            raise ClusterkitError(refused, UNREADABLE_HINT)
        if result.ok and result.stdout.strip():
            try:
                found[index] = SummaryFrame.from_json(
                    json.loads(result.stdout.strip().splitlines()[-1]),
                    f"{name}: observer summary")
            except WireError as exc:
                raise ClusterkitError(str(exc), UNREADABLE_HINT) from exc
    return found


def told_totals(jc: JobCluster, outcome: JobOutcome) -> dict[int, SummaryFrame]:
    """Every node's totals as its follower told them at the job's end (no call), when
    every node of ``jc`` did; else {} (the caller asks with ``summaries``)."""
    if set(outcome.totals) != {n.index or 0 for n in jc.nodes}:
        return {}
    return {index: SummaryFrame(totals) for index, totals in outcome.totals.items()}


def kept_report(jc: JobCluster, answers: dict[int, SummaryFrame]) -> report.JobReport | None:
    """The report kept on the master (report.json), if any."""
    kept = answers[0].report if 0 in answers else None
    if not kept:
        return None
    try:
        return report.JobReport.from_json(kept, f"{jc.node_name(0)}: {REPORT}")
    except WireError as exc:
        raise ClusterkitError(str(exc), UNREADABLE_HINT) from exc


def facts(jc: JobCluster) -> list[report.NodeFacts]:
    return [report.NodeFacts(n.index or 0, jc.node_name(n.index or 0), n.instance_type,
                             n.price, on_demand_price(n.instance_type, n.region))
            for n in jc.nodes]


def make(jc: JobCluster, job_id: str, state: JobState,
         answers: dict[int, SummaryFrame], recoveries: list[dict[str, Any]],
         findings: Sequence[dict[str, Any]] = (),
         preflight: dict[str, Any] | None = None,
         budget: Mapping[str, Any] | None = None) -> report.JobReport:
    made = report.build(jc.name, job_id, state.state.value, state.started,
                        state.updated if not state.state.active else None, facts(jc),
                        {i: a.totals for i, a in answers.items() if a.totals is not None},
                        findings=findings, recoveries=recoveries, preflight=preflight,
                        budget=budget)
    return dataclasses.replace(made, sizes=state.sizes)  # an elastic job's, else ()


def recoveries_json(recoveries: Sequence[Recovery]) -> list[dict[str, Any]]:
    """Each recovery as the report keeps it: its JSON and its line."""
    return [{**recovery_json(r), "describe": r.describe()} for r in recoveries]


def keep(jc: JobCluster, job_id: str, made: report.JobReport) -> None:
    """report.json (0600) in the job's directory on the master."""
    path = shlex.quote(f"{job_dir(job_id)}/{REPORT}")
    command = f"umask 077; cat > {path}.tmp && mv {path}.tmp {path}"
    jc.run([jc.master], {jc.master.hop.label: Call(
        command, json.dumps(made.to_json()).encode())}, timeout=30)


def with_report(rt: Runtime, outcome: JobOutcome, spec_file: str,
                region: str | None) -> JobOutcome:
    """``outcome`` with its job's report made, kept on the master and told; a report
    that cannot be made is warned about, never a failure of the job's command."""
    if outcome.detached or outcome.final is None or outcome.final.state.active:
        return outcome
    try:
        jc = jobs.open_job_cluster(rt, spec_file, region, cached=True)  # `up`'s, if kept
        answers = told_totals(jc, outcome) or summaries(jc, outcome.job_id)
        if jc.cached and 0 not in answers:  # the kept nodes do not hold: ask AWS
            jc = jobs.open_job_cluster(rt, spec_file, region)
            answers = summaries(jc, outcome.job_id)
        made = make(jc, outcome.job_id, outcome.final, answers,
                    recoveries_json(outcome.recoveries), outcome.findings,
                    outcome.preflight.to_json() if outcome.preflight else None,
                    outcome.budget)
        keep(jc, outcome.job_id, made)
    except (ClusterkitError, GroupError, ValueError, OSError) as exc:
        rt.warn(f"no report for job {outcome.job_id}: {str(exc).splitlines()[0]}",
                stage=Stage.TRAIN)
        return outcome
    return dataclasses.replace(outcome, report=made)


@dataclasses.dataclass(frozen=True)
class JobListing:
    """`clusterkit job`: the cluster's jobs (newest first) and one job's report (None:
    it still runs, or its nodes kept nothing to report)."""

    cluster: str
    jobs: tuple[JobState, ...]
    job_id: str
    report: report.JobReport | None

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id,
                "jobs": [{"job_id": j.job_id, "state": j.state.value, "started": j.started}
                         for j in self.jobs],
                "report": self.report.to_json() if self.report else None}


def do_job(target: str, job_id: str | None = None, *, region: str | None = None,
           profile: str | None = None, rt: Runtime | None = None) -> JobListing:
    """The cluster's jobs and the report of ``job_id`` (default the newest): the one
    kept on the master, else made now (and kept) when the job has ended."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, target, region)
    job_id, by_node = jobs.choose_job(jc, job_id)
    listed = sorted(by_node.get(jc.master.hop.label, []), key=lambda j: j.job_id,
                    reverse=True)
    state = jobs.job_on(listed, job_id)
    answers = summaries(jc, job_id)
    kept = kept_report(jc, answers)
    if kept is not None:
        return JobListing(jc.name, tuple(listed), job_id, kept)
    if state is None or state.state.active:
        return JobListing(jc.name, tuple(listed), job_id, None)
    made = make(jc, job_id, state, answers,
                recoveries_json(recoveries_of(state.recovery, state.started)))
    keep(jc, job_id, made)
    return JobListing(jc.name, tuple(listed), job_id, made)
