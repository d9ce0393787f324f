"""What the job commands return: typed values built once from the nodes' answers
(``jobfiles.JobState``), rendered by cli/ and serialised by ``to_json``.

A failure names the node the user knows (master, worker-2) beside the index the nodes
use; the cause of a failed job is the earliest failure by time, the others follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.node.jobstate import Failure, JobState, JobStateName
from clusterkit.node.totals import Summary
from clusterkit.plan.recovery import Recovery
from clusterkit.remote.results import GroupResult
from clusterkit.training.preflight import Preflight
from clusterkit.training.report import JobReport

NodeName = Callable[[int], str]  # a node index -> master / worker-N


@dataclass(frozen=True)
class FailureReport:
    """One failure as the user reads it: the node by name, the process and its role,
    what happened, and the process's last log lines where they were followed."""

    failure: Failure
    node: str  # master / worker-2
    tail: tuple[str, ...] = ()

    @property
    def process(self) -> str:
        return self.failure.process or "supervisor"  # no process: the node went silent

    @property
    def role(self) -> str:
        return self.process.split("-")[0] if self.failure.process else "node"

    @property
    def exit(self) -> int | None:
        return self.failure.exit

    def describe(self) -> str:
        if self.failure.process is None:
            return f"{self.node} {self.failure.how}"
        return f"{self.role} {self.process} on {self.node} {self.failure.how}"

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "process": self.process, "role": self.role,
                "exit": self.failure.exit, "signal": self.failure.signal,
                "time": self.failure.time, "tail": list(self.tail)}


def report_failures(state: JobState, name: NodeName,
                    tails: Mapping[tuple[str, str], Sequence[str]] | None = None,
                    ) -> tuple[FailureReport | None, tuple[FailureReport, ...]]:
    """(the cause, the others) of the master's ``state``, each with its log tail."""
    tails = tails or {}

    def report(failure: Failure) -> FailureReport:
        node = name(failure.node) if failure.node >= 0 else "?"
        return FailureReport(failure, node, tuple(tails.get((node, failure.process or ""), ())))

    cause = report(state.failed) if state.failed is not None else None
    return cause, tuple(report(f) for f in state.others)


@dataclass(frozen=True)
class JobOutcome:
    """Where a job stands after `train` / `logs`: its state on the master (the job's
    state), why it failed, and whether the client left it running (``detached``)."""

    cluster: str
    job_id: str
    state: JobStateName
    reason: str | None = None
    failed: FailureReport | None = None
    others: tuple[FailureReport, ...] = ()
    detached: bool = False
    recoveries: tuple[Recovery, ...] = ()  # lost nodes replaced and the job restarted
    final: JobState | None = field(default=None, compare=False, repr=False)  # the master's
    report: JobReport | None = field(default=None, compare=False, repr=False)  # once ended
    # what `train`'s diagnosis said while it followed the job (each kind once)
    findings: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, repr=False)
    # each node's running totals at the end, as its follower told them (node index ->)
    totals: Mapping[int, Summary] = field(default_factory=dict, compare=False, repr=False)
    # `train --preflight`'s checks before the job (None: none ran)
    preflight: Preflight | None = field(default=None, compare=False, repr=False)
    # the spend against the job's cap as it ended (``training.budget.Status``; None: no cap)
    budget: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.state is JobStateName.SUCCEEDED or (self.detached and self.state.active)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id, "state": self.state.value,
                "reason": self.reason, "ok": self.ok, "detached": self.detached,
                "failed": self.failed.to_json() if self.failed else None,
                "others": [f.to_json() for f in self.others],
                "recoveries": [recovery_json(r) for r in self.recoveries],
                "preflight": self.preflight.to_json() if self.preflight else None,
                "budget": dict(self.budget) if self.budget else None,
                "report": self.report.to_json() if self.report else None}


def recovery_json(recovery: Recovery) -> dict[str, Any]:
    """A recovery as `--json` shows it: its record and what it works out."""
    return {**recovery.to_json(), "seconds_to_running": recovery.seconds_to_running,
            "node_hours_lost": recovery.node_hours_lost, "cost_usd": recovery.cost_usd}


@dataclass(frozen=True)
class NodeStop:
    """One node's answer to ``stop``: the job's final state there, or the words it said
    instead (no such job here)."""

    state: JobState | None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.state is None:
            return {"message": self.message}
        return {"state": self.state.state.value, "reason": self.state.reason,
                "processes": {p.name: {"state": p.state and p.state.value, "exit": p.exit}
                              for p in self.state.processes}}


@dataclass(frozen=True)
class StopResult:
    """What ``stop`` did on each node: its supervisor's report (what was killed); or,
    for a job that had already ended, nothing, and its final state on the master."""

    cluster: str
    job_id: str
    nodes: dict[str, NodeStop]  # short node name -> its answer
    group: GroupResult = field(default_factory=GroupResult, repr=False)
    already: JobState | None = None  # the job had ended before: how (nothing was done)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id,
                "nodes": {name: n.to_json() for name, n in self.nodes.items()},
                "already_stopped": self.already is not None,
                "state": self.already.state.value if self.already else None}

    def describe_already(self) -> str:
        """``job j-… is already stopped: it ended failed (…); nothing to stop``."""
        assert self.already is not None
        why = f" ({self.already.reason})" if self.already.reason else ""
        return (f"job {self.job_id} is already stopped: it ended {self.already.state}{why}; "
                "nothing to stop")


@dataclass(frozen=True)
class JobSummary:
    """`status NAME`'s job section: the newest job, its state on the master (the job's
    state), its failures, and every node's state of it (None: the node has no such job)."""

    job_id: str
    state: JobStateName
    reason: str | None
    failed: FailureReport | None
    others: tuple[FailureReport, ...]
    nodes: dict[str, JobState | None]
    recoveries: tuple[Recovery, ...] = ()  # of this job and the jobs it restarted

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "state": self.state.value, "reason": self.reason,
                "failed": self.failed.to_json() if self.failed else None,
                "others": [f.to_json() for f in self.others],
                "recoveries": [recovery_json(r) for r in self.recoveries],
                "nodes": {name: NodeStop(s, "no such job here").to_json()
                          for name, s in self.nodes.items()}}
