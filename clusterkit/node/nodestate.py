"""state.json: how a job stands on one node, as one typed record. Stdlib only, Python
>= 3.8.

Written only by ``write`` (the supervisor's daemon while it runs, its ``start`` and
``stop`` verbs around it) and read only by ``read`` (the verbs, the follower, the
autostop watchdog) or, on the client, by ``parse`` of what a node sent (``jobfiles``);
nothing else names the file. The client's view of it is a ``jobstate.JobState``
(``NodeState.job_state``).

Shipped beside the supervisor and the watchdog, sent ahead of the follower (``bundle``),
imported by the client as ``clusterkit.node.nodestate``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

TYPE_CHECKING = False  # typing is ~10 ms of every node program's start
if TYPE_CHECKING:
    from typing import Any

try:  # imported as clusterkit.node.nodestate (the client, tests)
    from . import wire
    from .jobfile import RecoveryRecord
    from .jobstate import Failure, JobState, JobStateName, Outcome, ProcessState, failures_of
    from .nodefiles import read_json, write_json
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import wire
    from jobfile import RecoveryRecord
    from jobstate import Failure, JobState, JobStateName, Outcome, ProcessState, failures_of
    from nodefiles import read_json, write_json

NAME = "state.json"
RUNNING, GONE = "running", "gone"  # "supervisor": what the status verb saw


def path_in(job_dir: str) -> str:
    return os.path.join(job_dir, NAME)


@dataclass(frozen=True)
class Holder:
    """Where the job lives on the node: its cgroup (path and systemd unit: what a last
    resort stop kills) and its supervisor's pid."""

    cgroup: str | None = None
    cgroup_unit: str | None = None
    supervisor_pid: int | None = None

    def to_json(self) -> dict:
        return {"cgroup": self.cgroup, "cgroup_unit": self.cgroup_unit,
                "supervisor_pid": self.supervisor_pid}


@dataclass(frozen=True)
class NodeState:
    """One node's state of a job. ``reason``, ``failed``, ``others``: the job's outcome
    once decided (``state`` is then "stopping" until it is stopped here, then the
    outcome's); ``notices``: what the node's interruption and GPU watchers saw; the
    ``interruption`` (the master's): the notice that stopped the job; ``stalled``: when and
    why the job hung here; ``supervisor_running``: said by the status verb only."""

    KIND = "node state"
    VERSION = 1
    job_id: str
    node: int | None = None
    state: JobStateName = JobStateName.UNKNOWN
    reason: str | None = None
    failed: Failure | None = None
    others: tuple[Failure, ...] = ()
    processes: tuple[ProcessState, ...] = ()
    notices: tuple[Mapping[str, Any], ...] = ()
    interruption: Mapping[str, Any] | None = None
    started: float | None = None
    recovery: RecoveryRecord = RecoveryRecord()
    stalled: Mapping[str, Any] | None = None
    holder: Holder = Holder()
    supervisor_running: bool | None = None
    updated: float | None = None
    sizes: tuple[tuple[float, int], ...] = ()  # an elastic job's (epoch, nodes) changes

    def to_json(self) -> dict:
        fields = {
            "job_id": self.job_id, "node": self.node, "state": self.state.value,
            **Outcome(self.state, self.reason, self.failed, self.others).fields(),
            "processes": {p.name: p.to_json() for p in self.processes},
            "notices": [dict(n) for n in self.notices],
            "interruption": _plain(self.interruption), "started": self.started,
            "recovery": self.recovery.to_json(), "stalled": _plain(self.stalled),
            **self.holder.to_json(), "updated": self.updated}
        if self.supervisor_running is not None:
            fields["supervisor"] = RUNNING if self.supervisor_running else GONE
        if self.sizes:
            fields["sizes"] = [[at, n] for at, n in self.sizes]
        return wire.stamped(self.VERSION, fields)

    @classmethod
    def from_json(cls, data: object, where: str) -> NodeState:
        data = wire.version_of(data, cls.KIND, cls.VERSION, where)
        try:
            state = JobStateName(data.get("state", JobStateName.UNKNOWN.value))
        except ValueError:
            raise wire.WireError(cls.KIND, where, f"has an unknown state "
                                 f"{data.get('state')!r}") from None
        procs = wire.as_dict(data.get("processes")) or {}
        supervisor = data.get("supervisor")
        return cls(
            job_id=str(data.get("job_id", "")), node=wire.as_int(data.get("node")),
            state=state, reason=wire.as_str(data.get("reason")),
            failed=Failure.from_dict(data.get("failed")),
            others=failures_of(data.get("others")),
            processes=tuple(ProcessState.from_json(name, p)
                            for name, p in sorted(procs.items()) if isinstance(p, dict)),
            notices=tuple(n for n in wire.as_list(data.get("notices")) if isinstance(n, dict)),
            interruption=wire.as_dict(data.get("interruption")),
            started=wire.as_float(data.get("started")),
            recovery=RecoveryRecord.from_json(data.get("recovery"), f"{where} (recovery)"),
            stalled=wire.as_dict(data.get("stalled")),
            holder=Holder(wire.as_str(data.get("cgroup")), wire.as_str(data.get("cgroup_unit")),
                          wire.as_int(data.get("supervisor_pid"))),
            supervisor_running=None if supervisor is None else supervisor == RUNNING,
            updated=wire.as_float(data.get("updated")), sizes=wire.as_sizes(data.get("sizes")))

    def decided(self, outcome: Outcome | None) -> NodeState:
        """The same state with the job's outcome (none: none yet)."""
        if outcome is None:
            return dataclasses.replace(self, reason=None, failed=None, others=())
        return dataclasses.replace(self, reason=outcome.reason, failed=outcome.failed,
                                   others=outcome.others)

    def job_state(self) -> JobState:
        """The client's view (``jobstate.JobState``)."""
        return JobState(job_id=self.job_id, node=self.node, state=self.state,
                        reason=self.reason, failed=self.failed, others=self.others,
                        processes=self.processes, supervisor_running=self.supervisor_running,
                        updated=self.updated, started=self.started,
                        interruption=self.interruption, recovery=self.recovery,
                        sizes=self.sizes)

    def text(self) -> str:
        """One line of JSON, as the verbs and the follower print it."""
        return json.dumps(self.to_json(), sort_keys=True)


def _plain(value: Mapping[str, Any] | None) -> dict | None:
    return None if value is None else dict(value)


def read(job_dir: str, where: str = "") -> NodeState | None:
    """The job dir's state.json; None when there is none (or it is being replaced, or
    damaged); WireError when it is of a schema newer than this program's."""
    data = read_raw(job_dir)
    if data is None:
        return None
    return NodeState.from_json(data, f"{where}{': ' if where else ''}{path_in(job_dir)}")


def read_raw(job_dir: str) -> dict | None:
    """The job dir's state.json as written, unread: what the follower passes on to the
    client, which reads it (``parse``) and refuses what it cannot."""
    data = read_json(path_in(job_dir))
    return data if isinstance(data, dict) else None


def write(job_dir: str, state: NodeState) -> None:
    """The one writer of state.json (atomic, 0600)."""
    write_json(path_in(job_dir), state.to_json())


def parse(data: object, where: str) -> NodeState:
    """What a node sent (a state.json, the status verb's line, one of the follower's),
    read on the client; ``where`` names the node. WireError when it cannot be read."""
    return NodeState.from_json(data, f"{where}: {NAME}")


def state_from(data: Mapping[str, Any], state: JobStateName) -> JobState:
    """A JobState from a few fields (``{"job_id": ...}``) and ``state``: what the client
    says of a job whose node said nothing."""
    return dataclasses.replace(NodeState.from_json(dict(data), NAME), state=state).job_state()


# -- the stop verb's request to the daemon ------------------------------------------------

STOP_NAME = "stop.json"  # {"grace": seconds}: written by the stop verb, read by the daemon
# (the budget verb adds {"budget": reason, "checkpoint_for": seconds})


def write_stop(job_dir: str, grace: float, budget: str | None = None,
               checkpoint_for: float | None = None) -> None:
    extra = {} if budget is None else {"budget": budget, "checkpoint_for": checkpoint_for}
    write_json(os.path.join(job_dir, STOP_NAME), {"grace": grace, **extra})


def read_stop_budget(job_dir: str) -> tuple | None:
    """(reason, checkpoint seconds) when the budget verb asked for the stop, else None."""
    data = read_json(os.path.join(job_dir, STOP_NAME))
    if not isinstance(data, dict) or not isinstance(data.get("budget"), str):
        return None
    return data["budget"], wire.as_float(data.get("checkpoint_for")) or 0.0


def read_stop_grace(job_dir: str) -> float | None:
    """The grace the stop verb asked for (None: none asked)."""
    data = read_json(os.path.join(job_dir, STOP_NAME))
    return wire.as_float(data.get("grace")) if isinstance(data, dict) else None
