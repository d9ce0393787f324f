"""Which active jobs `train` waits for instead of refusing (issue 36): a job decided on
the master, or stopping wherever it is still active; one running anywhere is refused."""

from __future__ import annotations

import pytest

from clusterkit.cluster.jobs.ending import stopping
from clusterkit.node.jobstate import JobState
from clusterkit.node.jobstate import JobStateName as S
from clusterkit.node.nodestate import state_from

JOB, OTHER = "j-20260101-120000-ab12", "j-20260101-130000-cd34"


def _on(*states: S, job: str = JOB) -> dict[str, list[JobState]]:
    """label -> that node's one job, master (``m``) first."""
    return {label: [state_from({"job_id": job}, s)]
            for label, s in zip(("m", "w1", "w2"), states, strict=False)}


@pytest.mark.parametrize(("states", "waited"), [
    ((S.FAILED, S.FAILED, S.STOPPING), True),  # decided: a server still dying
    ((S.STOPPING, S.STOPPING, S.STOPPING), True),  # a `stop` under way
    ((S.STOPPING, S.SUCCEEDED, S.STOPPING), True),
    ((S.FAILED, S.RUNNING, S.STOPPING), True),  # the master decided: the node follows
    ((S.RUNNING, S.RUNNING, S.RUNNING), False),
    ((S.STOPPING, S.RUNNING, S.STOPPING), False),  # nobody decided: it runs
    ((S.STARTING, S.STARTING, S.STARTING), False),
])
def test_a_job_is_waited_for_only_once_it_is_ending(states: tuple[S, ...], waited: bool):
    assert stopping(_on(*states), "m", [JOB]) is waited


def test_every_active_job_must_be_ending():
    by_node = _on(S.FAILED, S.STOPPING)
    by_node["m"].append(state_from({"job_id": OTHER}, S.RUNNING))
    assert stopping(by_node, "m", [JOB]) and not stopping(by_node, "m", [JOB, OTHER])
    assert not stopping(by_node, "m", [])
