"""Where a training job lives on a node, and the client's reading of its state.json.

The client (cluster/ and cli/) builds node paths and reads node state only through
here: ``job_dir`` validates the id before it becomes a path, ``parse_state`` turns the
supervisor's JSON into a ``JobState`` (``clusterkit.node.jobstate``) or a ClusterkitError.
What is shipped to the nodes is assembled by ``clusterkit.node.bundle``.
"""

from __future__ import annotations

import json
import os

from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.node import nodestate, paths
from clusterkit.node.jobstate import JOB_ID_RE, JobState
from clusterkit.node.wire import WireError

ROOT_ENV = paths.ROOT_ENV


def check_job_id(job_id: str) -> str:
    if not JOB_ID_RE.match(job_id):
        raise UsageError(f"not a job id: {job_id!r}",
                         hint="job ids look like j-20250101-120000-ab12")
    return job_id


def job_dir(job_id: str, root: str | None = None) -> str:
    """The job's directory on a node (a POSIX path string), under ``root`` or
    ``$CLUSTERKIT_ROOT`` when set."""
    prefix = os.environ.get(ROOT_ENV, "") if root is None else root
    return paths.under(prefix, f"{paths.JOBS_DIR}/{check_job_id(job_id)}")


def parse_state(text: str, node: str = "a node") -> JobState:
    """The supervisor's state.json (or ``status`` output, or one line of the follower's
    ``jobs``) from ``node`` as a JobState; ClusterkitError when it is not that."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ClusterkitError(f"{node}: unreadable job state: {e}",
                              hint="the node's job dir may be damaged") from e
    return state_of(data, node)


def state_of(data: object, node: str = "a node") -> JobState:
    """One decoded state.json from ``node`` as a JobState; ClusterkitError when it is
    not that: damaged, or written by a newer clusterkit than this one (the error names
    the node, the file and both schema versions)."""
    try:
        return nodestate.parse(data, node).job_state()
    except WireError as e:  # a hint only when it is newer: `up` ships the programs again
        raise ClusterkitError(f"unreadable job state: {str(e).removesuffix(f' ({e.hint})')}",
                              hint=e.hint or "the node's job dir may be damaged") from e
