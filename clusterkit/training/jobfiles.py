"""Where a training job lives on a node and a typed view of its state.json.

The client (cluster/ and cli/) builds node paths and reads node state only through
here: ``job_dir`` validates the id before it becomes a path, ``parse_state`` turns the
supervisor's JSON into a ``JobState``, and ``node_files`` are the program shipped to
every node (over SSH stdin, into ``<job dir>/``: supervisor.py and the modules it imports
from its own directory).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.training.jobstate import (
    JOB_ID_RE,
    Failure,
    JobStateName,
    ProcStateName,
)

ROOT_ENV = "CLUSTERKIT_ROOT"  # prefixes every node path (tests), like the playbooks
JOB_ROOT = "/var/lib/clusterkit/jobs"
# The supervisor and its stdlib-only modules; it imports them from its own directory.
NODE_FILES = ("supervisor.py", "daemon.py", "coord.py", "reaping.py", "jobstate.py",
              "interruption.py", "sampler.py", "totals.py", "stall.py", "gpuhealth.py",
              "gpuwatch.py", "nodefiles.py")
__all__ = ["JOB_ID_RE", "Failure", "JobStateName", "ProcStateName", "JobState",
           "ProcessState", "check_job_id", "job_dir", "node_files", "node_program",
           "parse_state", "state_of", "state_from"]


@dataclass(frozen=True)
class ProcessState:
    name: str
    role: str
    pid: int | None
    state: ProcStateName | None  # None: a state this client does not know
    exit: int | None


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
    recovery: Mapping[str, Any] = field(default_factory=dict)


def check_job_id(job_id: str) -> str:
    if not JOB_ID_RE.match(job_id):
        raise UsageError(f"not a job id: {job_id!r}",
                         hint="job ids look like j-20250101-120000-ab12")
    return job_id


def job_dir(job_id: str, root: str | None = None) -> str:
    """The job's directory on a node (a POSIX path string), under ``root`` or
    ``$CLUSTERKIT_ROOT`` when set."""
    prefix = os.environ.get(ROOT_ENV, "") if root is None else root
    return prefix.rstrip("/") + f"{JOB_ROOT}/{check_job_id(job_id)}"


def node_program(name: str, modules: tuple[str, ...] = ("jobstate",)) -> bytes:
    """A node-side program sent over SSH stdin (``python3 - ARGS``) with ``modules``
    (of this package, in order) put in sys.modules first, so it imports the same
    definitions the client uses."""
    here = Path(__file__).parent
    prelude = "import sys, types\n"
    for module in modules:
        text = (here / f"{module}.py").read_text()
        prelude += (f"_m = sys.modules[{module!r}] = types.ModuleType({module!r})\n"
                    f"exec(compile({text!r}, {module + '.py'!r}, 'exec'), _m.__dict__)\n")
    prelude += "del _m\n" if modules else ""
    return prelude.encode() + (here / name).read_bytes()


def node_files() -> dict[str, str]:
    """What goes into every job dir beside job.json: file name -> text."""
    here = Path(__file__).parent
    return {name: (here / name).read_text() for name in NODE_FILES}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _proc_state(value: object) -> ProcStateName | None:
    try:
        return ProcStateName(value)
    except ValueError:
        return None


def parse_state(text: str) -> JobState:
    """The supervisor's state.json (or ``status`` output, or one line of the follower's
    ``jobs``) as a JobState; ClusterkitError when it is not that."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ClusterkitError(f"unreadable job state: {e}",
                              hint="the node's job dir may be damaged") from e
    return state_of(data)


def state_of(data: object) -> JobState:
    """One decoded state.json as a JobState; ClusterkitError when it is not that."""
    try:
        state = JobStateName(data.get("state", "unknown"))  # type: ignore[union-attr]
    except (ValueError, AttributeError) as e:
        raise ClusterkitError(f"unreadable job state: {e}",
                              hint="the node's job dir may be damaged") from e
    return state_from(data, state)  # type: ignore[arg-type]


def state_from(data: dict, state: JobStateName) -> JobState:
    procs = tuple(
        ProcessState(name=str(name), role=str(p.get("role", "")), pid=_int(p.get("pid")),
                     state=_proc_state(p.get("state")), exit=_int(p.get("exit")))
        for name, p in sorted((data.get("processes") or {}).items()) if isinstance(p, dict))
    others = data.get("others")
    supervisor = data.get("supervisor")
    return JobState(
        job_id=str(data.get("job_id", "")), node=_int(data.get("node")), state=state,
        reason=data.get("reason") if isinstance(data.get("reason"), str) else None,
        failed=Failure.from_dict(data.get("failed")),
        others=tuple(f for f in map(Failure.from_dict, others if isinstance(others, list)
                                    else []) if f is not None),
        processes=procs,
        supervisor_running=None if supervisor is None else supervisor == "running",
        updated=_time(data.get("updated")), started=_time(data.get("started")),
        interruption=_dict(data.get("interruption")), recovery=_dict(data.get("recovery")) or {})


def _time(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else None


def _dict(value: object) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None
