"""cluster/jobs/afterjob.py's decision (`train --down` / `--down-always`): which ends of
a job take its cluster down, and what is said when one does not."""

from __future__ import annotations

import pytest

from clusterkit.cluster.jobs.afterjob import DownWhen, decide
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.node.jobstate import JobStateName as S


@pytest.mark.parametrize(("state", "detached", "when", "down"), [
    (S.SUCCEEDED, False, DownWhen.SUCCESS, True),
    (S.FAILED, False, DownWhen.SUCCESS, False),
    (S.STOPPED, False, DownWhen.SUCCESS, False),  # Ctrl-C, the job stopped
    (S.INTERRUPTED, False, DownWhen.SUCCESS, False),  # no recovery left
    (S.FAILED, False, DownWhen.ALWAYS, True),
    (S.STOPPED, False, DownWhen.ALWAYS, True),
    (S.SUCCEEDED, False, DownWhen.ALWAYS, True),
    (S.RUNNING, True, DownWhen.ALWAYS, False),  # left running at Ctrl-C: never
    (S.SUCCEEDED, False, DownWhen.NEVER, False),
])
def test_which_ends_take_the_cluster_down(state: S, detached: bool, when: DownWhen,
                                          down: bool):
    after = decide(JobOutcome("c1", "j-1", state, detached=detached), when)
    assert after.down is down and after.when is when
    assert after.to_json()["down"] is down and after.to_json()["result"] is None


def test_a_failed_job_under_down_says_the_cluster_is_left_and_how_to_remove_it():
    after = decide(JobOutcome("c1", "j-1", S.FAILED), DownWhen.SUCCESS)
    assert "job j-1 failed: cluster c1 is left up to look at" in after.reason
    assert "--down-always" in after.reason and "`clusterkit down c1`" in after.reason
    still = decide(JobOutcome("c1", "j-1", S.RUNNING, detached=True), DownWhen.SUCCESS)
    assert "still runs" in still.reason and "`clusterkit down c1`" in still.reason
    assert decide(JobOutcome("c1", "j-1", S.SUCCEEDED), DownWhen.NEVER).reason == ""
