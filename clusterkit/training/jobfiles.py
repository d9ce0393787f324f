"""Where a training job lives on a node and a typed view of its state.json.

The client (cluster/ and cli/) builds node paths and reads node state only through
here: ``job_dir`` validates the id before it becomes a path, ``parse_state`` turns the
supervisor's JSON into a ``JobState``, and ``node_files`` are the program shipped to
every node (over SSH stdin, into ``<job dir>/``: supervisor.py and the modules it imports
from its own directory).
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from clusterkit.errors import ClusterkitError, UsageError

ROOT_ENV = "CLUSTERKIT_ROOT"  # prefixes every node path (tests), like the playbooks
JOB_ROOT = "/var/lib/clusterkit/jobs"
JOB_ID_RE = re.compile(r"^j-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
# The supervisor and its stdlib-only modules; it imports them from its own directory.
NODE_FILES = ("supervisor.py", "coord.py", "reaping.py")


class JobStateName(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    UNKNOWN = "unknown"  # status found no state.json

    @property
    def final(self) -> bool:
        return self in (JobStateName.SUCCEEDED, JobStateName.FAILED, JobStateName.STOPPED)


@dataclass(frozen=True)
class FailedProcess:
    node: int
    process: str | None  # None: the node stopped answering
    exit: int | None


@dataclass(frozen=True)
class ProcessState:
    name: str
    role: str
    pid: int | None
    state: str  # running | exited | gone (dead without an exit file)
    exit: int | None


@dataclass(frozen=True)
class JobState:
    job_id: str
    node: int | None
    state: JobStateName
    reason: str | None
    failed: FailedProcess | None
    processes: tuple[ProcessState, ...]
    supervisor_running: bool | None  # None: not said (state.json read directly)
    updated: float | None


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


def node_files() -> dict[str, str]:
    """What goes into every job dir beside job.json: file name -> text."""
    here = Path(__file__).parent
    return {name: (here / name).read_text() for name in NODE_FILES}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_state(text: str) -> JobState:
    """The supervisor's state.json (or ``status`` output) as a JobState; ClusterkitError
    when it is not that."""
    try:
        data = json.loads(text)
        state = JobStateName(data.get("state", "unknown"))
    except (ValueError, AttributeError) as e:
        raise ClusterkitError(f"unreadable job state: {e}",
                              hint="the node's job dir may be damaged") from e
    failed = data.get("failed")
    procs = tuple(
        ProcessState(name=str(name), role=str(p.get("role", "")), pid=_int(p.get("pid")),
                     state=str(p.get("state", "")), exit=_int(p.get("exit")))
        for name, p in sorted((data.get("processes") or {}).items()))
    supervisor = data.get("supervisor")
    return JobState(
        job_id=str(data.get("job_id", "")), node=_int(data.get("node")), state=state,
        reason=data.get("reason"), processes=procs,
        failed=FailedProcess(node=int(failed.get("node", -1)), process=failed.get("process"),
                             exit=_int(failed.get("exit")))
        if isinstance(failed, dict) else None,
        supervisor_running=None if supervisor is None else supervisor == "running",
        updated=data.get("updated"))
