"""What a job lost and what replacing it cost. PURE: a job's final state on the master
and which of the cluster's instances still run in, the lost nodes and why out; a
recovery's record (one line in `status` and in the job's record) from its times.

A node is lost when EC2 gave it a spot interruption notice, when its GPU health check
found its GPUs unfit (unhealthy: its instance still runs, and is replaced all the same),
when its instance no longer runs (gone), or when it stopped answering the master for ``train.node_timeout`` while its
instance still runs (unreachable). A job that failed on its own (a process exited
non-zero, every node answering) lost nothing: recovering would only fail it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from clusterkit.node.jobfile import RecoveryRecord
from clusterkit.node.jobstate import Failure, JobStateName

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


@dataclass(frozen=True)
class Loss:
    """The lost nodes (index -> why) of a job that ended, and when: ``since`` when the
    loss was first seen (a notice: when the master heard it; else the failure's time),
    ``stopped`` when the job had ended (its last state), epoch seconds."""

    nodes: Mapping[int, LossReason]
    since: float
    stopped: float


@dataclass(frozen=True)
class Ending:
    """How a job ended, as the master's state.json says (``jobfiles.JobState``)."""

    state: JobStateName
    failures: Sequence[Failure] = ()  # the cause first, then the others
    interruption: Mapping[str, Any] | None = None  # the notice: node, action, at, seen
    updated: float | None = None  # when the state was written


def find_loss(state: Ending | None, running: Mapping[int, bool], now: float) -> Loss | None:
    """The nodes the job lost, from how the job ended on the master (None: the master
    could not be read) and ``running`` (node index -> whether its instance still runs);
    None when the job lost no node (it succeeded, was stopped, or failed on its own)."""
    lost = {i: LossReason.GONE for i, up in running.items() if not up}
    if state is None:  # a master that runs but does not answer the client may be fine
        return Loss(lost, now, now) if lost else None
    if state.state not in ENDING:
        return None
    seen = [t for t in (f.time for f in _silent(state)) if t is not None]
    for failure in _silent(state):
        lost.setdefault(failure.node, LossReason.UNREACHABLE)
    notice = state.interruption or {}
    if state.state is JobStateName.INTERRUPTED and isinstance(notice.get("node"), int):
        lost.setdefault(notice["node"], LossReason.UNHEALTHY if notice.get("kind") == "unfit"
                        else LossReason.NOTICE)
        seen.append(float(notice.get("seen") or now))
    if not lost:
        return None
    stopped = state.updated or now
    return Loss(lost, min(seen, default=stopped), stopped)


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

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "lost": dict(self.lost),
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
                       tuple(str(n) for n in data.get("from_standby") or ()))
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
        nodes = ", ".join(f"{name} ({why}{', by its standby' if name in self.from_standby else ''})"
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
