"""A training job's states, its id, and its failure record: stdlib only, Python >= 3.8.

The one definition both sides use: shipped beside ``supervisor.py`` into every job dir
(``bundle.SUPERVISOR``) and sent ahead of ``follower.py`` over SSH stdin, and imported
by the client as ``clusterkit.node.jobstate``. The supervisor writes these names into
state.json (``nodestate``); the client reads them back as a ``JobState``.

The cause of a failed job is its earliest failure by time (torch elastic's rule): the
process that died first, not the lowest node index; failures after it are listed too.
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TYPE_CHECKING = False  # typing is ~10 ms of every node program's start
if TYPE_CHECKING:
    from typing import Any

try:  # imported as clusterkit.node.jobstate (the client, tests)
    from . import wire
    from .jobfile import RecoveryRecord
except ImportError:  # run from a job dir on a node, or sent ahead of a program
    import wire
    from jobfile import RecoveryRecord

JOB_ID_RE = re.compile(r"^j-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
ROLES_WAITED = ("worker", "torchrun")  # the job succeeds when all of these exit 0
LAUNCHER_ROLE = "torchrun"  # starts the job's real processes: spared the checkpoint signal
# MXNet's scheduler and servers (`python -c "import mxnet"`) hold no checkpoint and
# would die of it: their whole process groups are spared the checkpoint signal.
SPARED_ROLES = ("scheduler", "server")


class _Name(str, enum.Enum):
    """A str enum that prints and formats as its value on every Python (3.12 changed
    format() of mixed-in enums)."""

    def __str__(self) -> str:
        return str(self.value)

    __format__ = str.__format__


class JobStateName(_Name):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"  # a spot interruption notice: checkpoint, then stopped
    BUDGET = "budget"  # the job's spending cap (train.max_cost): checkpoint, then stopped
    UNKNOWN = "unknown"  # no state.json (the supervisor never wrote one)

    @property
    def final(self) -> bool:
        return self.value in FINAL

    @property
    def active(self) -> bool:
        return self.value in ACTIVE


FINAL = ("succeeded", "failed", "stopped", "interrupted", "budget")
# The outcomes that give every process the checkpoint signal and its grace before SIGTERM
CHECKPOINTED = ("interrupted", "budget")
ACTIVE = ("starting", "running", "stopping")


class ProcStateName(_Name):
    RUNNING = "running"
    EXITED = "exited"
    GONE = "gone"  # dead without an exit file (the supervisor was killed with it)


@dataclass(frozen=True)
class Failure:
    """One failure: a process that exited non-zero or was killed, or (``process`` None)
    a node that stopped answering. ``time``: seconds since the epoch, on that node."""

    node: int
    process: str | None
    exit: int | None = None
    signal: int | None = None
    time: float | None = None

    @classmethod
    def from_returncode(cls, node: int, process: str, code: int,
                        when: float | None) -> Failure:
        """Popen's returncode: negative is the signal that killed the process."""
        if code < 0:
            return cls(node, process, None, -code, when)
        return cls(node, process, code, None, when)

    @classmethod
    def from_dict(cls, data: object) -> Failure | None:
        if not isinstance(data, dict):
            return None
        return cls(node=_int(data.get("node"), -1), process=_str(data.get("process")),
                   exit=_int(data.get("exit")), signal=_int(data.get("signal")),
                   time=_float(data.get("time")))

    def to_dict(self) -> dict:
        return {"node": self.node, "process": self.process, "exit": self.exit,
                "signal": self.signal, "time": self.time}

    @property
    def how(self) -> str:
        """What happened, in words: "exited with 3", "killed by SIGKILL", ..."""
        if self.process is None:
            return "stopped answering"
        if self.signal is not None:
            return f"killed by {signal_name(self.signal)}"
        return f"exited with {self.exit}"

    def describe(self) -> str:
        who = f"node {self.node}" + (f" {self.process}" if self.process else "")
        return f"{who} {self.how}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def earliest(failures: Iterable[Failure]) -> tuple[Failure | None, list[Failure]]:
    """(the cause, the others in time order): the earliest failure by time; one with no
    time counts as later than any timed one; node and name break ties."""
    ordered = sorted(failures, key=lambda f: (f.time is None, f.time or 0.0, f.node,
                                              f.process or ""))
    return (ordered[0], ordered[1:]) if ordered else (None, [])


def process_failures(nodes: dict) -> list[Failure]:
    """Every failure in the processes the nodes reported: {node: {name: view}} where a
    view has "exit" (Popen's returncode) and "ended" (epoch seconds)."""
    found = []
    for node, procs in nodes.items():
        for name, view in procs.items():
            code = _int(view.get("exit"))
            if code not in (None, 0):
                found.append(Failure.from_returncode(int(node), name, code,
                                                     _float(view.get("ended"))))
    return found


@dataclass(frozen=True)
class Outcome:
    """The job's result, as the master decides it and every node keeps it (torch
    elastic's ``RunResult``): the final state, why, and for a failure its cause (the
    earliest failure) and the failures after it. The processes a node stopped itself are
    in neither. The same fields cross the link (``coord``'s stop message) and state.json."""

    KIND = "outcome"
    VERSION = 1
    state: JobStateName
    reason: str | None = None
    failed: Failure | None = None
    others: tuple[Failure, ...] = ()

    def fields(self) -> dict:
        """What the stop message and state.json hold (without the version)."""
        return {"state": self.state.value, "reason": self.reason,
                "failed": self.failed.to_dict() if self.failed is not None else None,
                "others": [f.to_dict() for f in self.others]}

    def to_json(self) -> dict:
        return wire.stamped(self.VERSION, self.fields())

    @classmethod
    def from_json(cls, data: object, where: str) -> Outcome:
        data = wire.version_of(data, cls.KIND, cls.VERSION, where)
        try:
            state = JobStateName(data.get("state"))
        except ValueError:
            raise wire.WireError(cls.KIND, where, f"has an unknown state "
                                 f"{data.get('state')!r}") from None
        return cls(state, _str(data.get("reason")), Failure.from_dict(data.get("failed")),
                   failures_of(data.get("others")))

    @classmethod
    def failure(cls, cause: Failure, others: Iterable[Failure] = ()) -> Outcome:
        return cls(JobStateName.FAILED, cause.describe(), cause, tuple(others))


def failures_of(data: object) -> tuple[Failure, ...]:
    """A JSON list of failure records, the unreadable ones left out."""
    found = (Failure.from_dict(f) for f in (data if isinstance(data, list) else []))
    return tuple(f for f in found if f is not None)


def _int(value: object, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# -- the client's typed view of one state.json (``nodestate.NodeState.job_state``) ------

@dataclass(frozen=True)
class ProcessState:
    name: str
    role: str
    pid: int | None
    state: ProcStateName | None  # None: a state this client does not know
    exit: int | None
    ended: float | None = None  # epoch seconds, on its node: what orders failures

    def to_json(self) -> dict:
        """The process as state.json holds it (under its name)."""
        return {"pid": self.pid, "role": self.role,
                "state": self.state.value if self.state is not None else None,
                "exit": self.exit, "ended": self.ended}

    @classmethod
    def from_json(cls, name: str, data: dict) -> ProcessState:
        return cls(name=str(name), role=str(data.get("role", "")), pid=_int(data.get("pid")),
                   state=_proc_state(data.get("state")), exit=_int(data.get("exit")),
                   ended=_float(data.get("ended")))


@dataclass(frozen=True)
class JobState:
    job_id: str
    node: int | None
    state: JobStateName
    reason: str | None
    failed: Failure | None  # the cause: the earliest failure by time
    others: tuple[Failure, ...]  # the failures after it
    processes: tuple[ProcessState, ...]
    supervisor_running: bool | None  # None: not said (state.json read directly)
    updated: float | None
    started: float | None = None  # when this node's processes were started
    # the master's record of a spot interruption notice: node, action, at, seen
    interruption: Mapping[str, Any] | None = None
    # a restarted job's record (job.json's "recovery": first_job, restart_count, ...)
    recovery: RecoveryRecord = RecoveryRecord()
    # an elastic job's size over time (the master's): (epoch, nodes) at each change
    sizes: tuple[tuple[float, int], ...] = ()


def _proc_state(value: object) -> ProcStateName | None:
    try:
        return ProcStateName(value)
    except ValueError:
        return None
