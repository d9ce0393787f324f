"""What a job lost and what replacing it cost. PURE: a job's final state on the master
and which of the cluster's instances still run in, the lost nodes and why out; a
recovery's record (one line in `status` and in the job's record) from its times.

A node is lost on evidence only (``plan.evidence``, which decides each node and words its
evidence): a spot interruption notice or a Capacity Block's end, its GPU health check
finding its GPUs unfit (unhealthy: its instance still runs, and is replaced all the
same), an EC2 state that says so (gone: stopping, stopped, shutting-down, terminated, not
listed) or an impaired status check (impaired), or silence to the master for
``train.node_timeout`` confirmed by EC2 (unreachable). A job that failed on its own (a
process exited non-zero, every node answering) lost nothing: recovering would only fail
it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from clusterkit.kinds import InstanceState
from clusterkit.node.jobfile import RecoveryRecord
from clusterkit.node.jobstate import Failure, JobStateName
from clusterkit.plan.evidence import (
    Ec2Seen,
    NodeDecision,
    NodeFacts,
    NoticeSeen,
    Verdict,
    decide_all,
)

MASTER = 0
# The states a job that lost a node ends in; STOPPING: the master still waits out its
# grace for a node that went silent (`logs -f` hands it over before then).
ENDING = (JobStateName.INTERRUPTED, JobStateName.FAILED, JobStateName.UNKNOWN,
          JobStateName.STOPPING)


class LossReason(StrEnum):
    NOTICE = "notice"  # a spot interruption notice in the node's instance metadata
    REBALANCE = "rebalance"  # swapped for its standby after a rebalance recommendation
    UNREACHABLE = "unreachable"  # silent for node_timeout, its instance still running
    GONE = "gone"  # its instance no longer runs (reclaimed, terminated, stopped)
    UNHEALTHY = "unhealthy"  # its GPU health check found it unfit (a fatal Xid, a GPU gone)
    IMPAIRED = "impaired"  # EC2's status check of its instance (or its host) is impaired


@dataclass(frozen=True)
class Loss:
    """The lost nodes (index -> why) of a job that ended, and when: ``since`` when the
    loss was first seen (a notice: when the master heard it; else the failure's time),
    ``stopped`` when the job had ended (its last state), epoch seconds."""

    nodes: Mapping[int, LossReason]
    since: float
    stopped: float
    decisions: tuple[NodeDecision, ...] = field(default=(), compare=False)  # every node's

    def evidence(self) -> dict[int, str]:
        """Lost node index -> its evidence in words."""
        return {d.index: d.evidence for d in self.decisions if d.verdict is Verdict.LOST}


@dataclass(frozen=True)
class Ending:
    """How a job ended, as the master's state.json says (``jobfiles.JobState``)."""

    state: JobStateName
    failures: Sequence[Failure] = ()  # the cause first, then the others
    interruption: Mapping[str, Any] | None = None  # the notice: node, action, at, seen
    updated: float | None = None  # when the state was written


# What EC2 answered, node index -> what it lists (a bool: running, or no instance listed);
# None: EC2 did not answer.
Ec2View = Mapping[int, "bool | Ec2Seen"] | None


def find_loss(state: Ending | None, running: Ec2View, now: float, *,
              node_timeout: float = 60.0) -> Loss | None:
    """The nodes the job lost, from how the job ended on the master (None: the master
    could not be read) and what EC2 lists for each node index (``running``); None when
    the job lost no node (it succeeded, was stopped, or failed on its own, or nothing is
    evidence of a loss). Every node's decision is in the Loss's ``decisions``."""
    return weigh(state, running, now, node_timeout=node_timeout)[0]


def weigh(state: Ending | None, running: Ec2View, now: float, *,
          node_timeout: float = 60.0) -> tuple[Loss | None, list[NodeDecision]]:
    """``find_loss`` with every node's decision (kept and unconfirmed ones too)."""
    if state is not None and state.state not in ENDING:
        return None, []
    decisions = decide_all(node_facts(state, running, node_timeout), node_timeout)
    lost = {d.index: LossReason(d.cause.value) for d in decisions
            if d.verdict is Verdict.LOST and d.cause is not None}
    if not lost:
        return None, decisions
    if state is None:
        return Loss(lost, now, now, tuple(decisions)), decisions
    seen = [f.time for f in _silent(state) if f.time is not None and f.node in lost]
    notice = state.interruption or {}
    if notice.get("node") in lost:
        seen.append(float(notice.get("seen") or now))
    stopped = state.updated or now
    return Loss(lost, min(seen, default=stopped), stopped, tuple(decisions)), decisions


def node_facts(state: Ending | None, running: Ec2View,
               node_timeout: float) -> list[NodeFacts]:
    """Each node's facts: its notice and its silence as the master recorded them (the
    master declares a node silent once it heard nothing for ``node_timeout``), what EC2
    lists for it."""
    ec2 = {i: _seen(v) for i, v in (running or {}).items()}
    silent = {f.node for f in _silent(state)} if state is not None else set()
    notice = (state.interruption or {}) if state is not None and \
        state.state is JobStateName.INTERRUPTED else {}
    noticed = notice.get("node") if isinstance(notice.get("node"), int) else None
    noise = ("this client could not read the job's state on the master",) \
        if state is None else ()
    found = []
    for i in sorted({*ec2, *silent, *([noticed] if noticed is not None else [])}):
        kind, action = (_notice_kind(notice), notice.get("action")) if i == noticed \
            else (None, None)
        found.append(NodeFacts(i, kind, action, ec2.get(i) if running is not None else None,
                               node_timeout if i in silent else None, noise))
    return found


def _notice_kind(notice: Mapping[str, Any]) -> NoticeSeen:
    if notice.get("kind") == "unfit":
        return NoticeSeen.UNFIT
    return NoticeSeen.BLOCK_END if notice.get("action") == "block-end" \
        else NoticeSeen.INTERRUPTION


def _seen(value: bool | Ec2Seen) -> Ec2Seen:
    if isinstance(value, Ec2Seen):
        return value
    return Ec2Seen(InstanceState.RUNNING if value else None)


def _silent(state: Ending) -> list[Failure]:
    """The failures that are a node gone silent (no process named)."""
    return [f for f in state.failures if f.process is None and f.node >= 0]


@dataclass(frozen=True)
class Recovery:
    """One recovery as the job's record keeps it (job.json and state.json ``recovery``)
    and `status` prints it. Times are epoch seconds; ``running`` is when the restarted
    job's processes ran again (None until the restarted job says)."""

    number: int
    lost: Mapping[str, str]  # node name -> LossReason value
    replaced: Mapping[str, Sequence[str]]  # node name -> [old instance id, new one]
    since: float
    stopped: float
    job: str  # the job that lost the nodes
    node_count: int
    last_checkpoint: float | None = None
    hourly_usd: float | None = None  # the cluster's, when every node's price is known
    running: float | None = None
    from_standby: tuple[str, ...] = ()  # the nodes whose standby was swapped in
    evidence: Mapping[str, str] = field(default_factory=dict)  # node name -> why lost, in words

    def to_json(self) -> dict[str, Any]:
        extra = {"evidence": dict(self.evidence)} if self.evidence else {}
        return {**extra, "number": self.number, "lost": dict(self.lost),
                "replaced": {k: list(v) for k, v in self.replaced.items()},
                "since": self.since, "stopped": self.stopped, "job": self.job,
                "node_count": self.node_count, "last_checkpoint": self.last_checkpoint,
                "hourly_usd": self.hourly_usd, "running": self.running,
                "from_standby": list(self.from_standby)}

    @classmethod
    def from_json(cls, data: object) -> Recovery | None:
        """``to_json``'s dict back; None when it is not one (a damaged record)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["number"]), dict(data["lost"]),
                       {k: tuple(v) for k, v in dict(data.get("replaced") or {}).items()},
                       float(data["since"]), float(data["stopped"]), str(data["job"]),
                       int(data["node_count"]), _num(data.get("last_checkpoint")),
                       _num(data.get("hourly_usd")), _num(data.get("running")),
                       tuple(str(n) for n in data.get("from_standby") or ()),
                       {str(k): str(v) for k, v in dict(data.get("evidence") or {}).items()})
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def seconds_to_running(self) -> float | None:
        """From the loss (the notice) to the job's processes running again."""
        return None if self.running is None else max(0.0, self.running - self.since)

    @property
    def node_hours_lost(self) -> float | None:
        """Every node's work since the last checkpoint (none: since the loss) plus every
        node's time without training, until it ran again."""
        if self.running is None:
            return None
        saved = self.last_checkpoint if self.last_checkpoint is not None else self.since
        redo = max(0.0, self.stopped - min(saved, self.stopped))
        down = max(0.0, self.running - self.stopped)
        return self.node_count * (redo + down) / 3600

    @property
    def cost_usd(self) -> float | None:
        hours = self.node_hours_lost
        if hours is None or self.hourly_usd is None or not self.node_count:
            return None
        return hours * self.hourly_usd / self.node_count

    def describe(self) -> str:
        """``recovery 1 at 14:03:05 UTC: worker-2 replaced (notice); running again 84 s
        after it; 0.12 node-hours lost ($0.05)``."""
        when = datetime.fromtimestamp(self.since, UTC).strftime("%H:%M:%S UTC")
        nodes = ", ".join(f"{name} ({why}{', by its standby' if name in self.from_standby else ''}"
                          f"{': ' + self.evidence[name] if name in self.evidence else ''})"
                          for name, why in sorted(self.lost.items()))
        words = f"recovery {self.number} at {when}: replaced {nodes}"
        if self.seconds_to_running is None:
            return words + "; not running again yet"
        cost = f" (${self.cost_usd:.2f})" if self.cost_usd is not None else ""
        return (words + f"; running again {self.seconds_to_running:.0f} s later; "
                f"{self.node_hours_lost:.2f} node-hours lost{cost}")


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def job_record(first_job: str, recoveries: Sequence[Recovery], command: str,
               ) -> RecoveryRecord:
    """What every job's job.json carries as ``recovery`` (its state.json too): the job
    it restarts (itself, first), every recovery so far, and the training command, with
    which `train --attach` starts it again."""
    return RecoveryRecord(first_job, len(recoveries), tuple(r.to_json() for r in recoveries),
                          command)


def recoveries_of(record: RecoveryRecord, started: float | None) -> list[Recovery]:
    """A job's record back as Recoveries, the newest completed by ``started`` (when the
    job that record belongs to started its processes: the training running again)."""
    found = [r for r in map(Recovery.from_json, record.recoveries) if r]
    if found and found[-1].running is None and started is not None:
        found[-1] = dataclasses.replace(found[-1], running=started)
    return found
