"""The client's view of a job on a node (training/jobfiles.py): the job dir's path and
state.json as a typed JobState."""

from __future__ import annotations

import json

import pytest

from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.node import jobstate
from clusterkit.training import jobfiles

JOB_ID = "j-20250101-120000-ab12"


def test_job_dir_validates_the_id_and_honours_the_root(monkeypatch) -> None:
    monkeypatch.delenv(jobfiles.ROOT_ENV, raising=False)
    assert jobfiles.job_dir(JOB_ID) == f"/var/lib/clusterkit/jobs/{JOB_ID}"
    assert jobfiles.job_dir(JOB_ID, root="/tmp/n1/") == f"/tmp/n1/var/lib/clusterkit/jobs/{JOB_ID}"
    monkeypatch.setenv(jobfiles.ROOT_ENV, "/r")
    assert jobfiles.job_dir(JOB_ID) == f"/r/var/lib/clusterkit/jobs/{JOB_ID}"
    with pytest.raises(UsageError):
        jobfiles.job_dir("j-2025/../../etc")


def test_parse_state_gives_a_typed_view() -> None:
    text = json.dumps({
        "job_id": JOB_ID, "node": 0, "state": "failed", "reason": "node 1 worker-0 exited with 3",
        "failed": {"node": 1, "process": "worker-0", "exit": 3, "signal": None, "time": 7.5},
        "others": [{"node": 2, "process": "server-0", "exit": None, "signal": 9, "time": 8},
                   "not a failure"],
        "supervisor": "gone",
        "processes": {"worker-0": {"pid": 12, "role": "worker", "state": "exited", "exit": -15},
                      "server-0": {"pid": 11, "role": "server", "state": "running",
                                   "exit": None}}, "updated": 1.5})
    state = jobfiles.parse_state(text)
    assert state.state is jobstate.JobStateName.FAILED and state.state.final
    assert state.failed == jobstate.Failure(node=1, process="worker-0", exit=3, time=7.5)
    assert state.others == (jobstate.Failure(2, "server-0", signal=9, time=8.0),)
    assert state.others[0].describe() == "node 2 server-0 killed by SIGKILL"
    assert [p.name for p in state.processes] == ["server-0", "worker-0"]
    assert state.processes[1] == jobstate.ProcessState(
        "worker-0", "worker", 12, jobstate.ProcStateName.EXITED, -15)
    assert state.supervisor_running is False
    quiet = jobfiles.parse_state(json.dumps({"job_id": JOB_ID, "state": "running"}))
    assert quiet.failed is None and quiet.supervisor_running is None and quiet.others == ()
    assert not quiet.state.final
    for bad in ("{", '{"state": "exploded"}', "[]"):
        with pytest.raises(ClusterkitError):
            jobfiles.parse_state(bad)


def test_a_state_from_a_newer_clusterkit_is_refused_naming_the_node_file_and_versions() -> None:
    """A node whose job was started by a newer clusterkit than this client: `train`,
    `status` and `logs` say which node, which file, both versions, and what to do."""
    text = json.dumps({"v": 2, "job_id": JOB_ID, "state": "running"})
    with pytest.raises(ClusterkitError) as refused:
        jobfiles.parse_state(text, "node worker-1")
    message = str(refused.value)
    assert "node worker-1: state.json" in message and "version 2" in message
    assert "(1)" in message and "clusterkit up" in (refused.value.hint or "")
    with pytest.raises(ClusterkitError, match="node worker-1"):
        jobfiles.state_of({"v": 2, "job_id": JOB_ID}, "node worker-1")
