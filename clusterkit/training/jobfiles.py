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
from clusterkit.node import paths
from clusterkit.node.jobstate import JOB_ID_RE, JobState, JobStateName, state_from

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
