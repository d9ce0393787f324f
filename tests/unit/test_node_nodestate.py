"""node/nodestate.py: state.json's one writer and reader on a node, the status verb's
view of it, and what an older watchdog makes of a newer job's state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterkit.node import nodestate, watchdog
from clusterkit.node.jobstate import Failure, JobStateName, Outcome
from clusterkit.node.wire import WireError

JOB_ID = "j-20250101-120000-ab12"


def test_written_once_read_back_the_same_and_private(tmp_path: Path) -> None:
    state = nodestate.NodeState(JOB_ID, 1, JobStateName.STOPPING, updated=5.0).decided(
        Outcome.failure(Failure(1, "worker-0", exit=3, time=4.0)))
    nodestate.write(str(tmp_path), state)
    assert nodestate.read(str(tmp_path)) == state
    assert os.stat(nodestate.path_in(str(tmp_path))).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == [nodestate.NAME]
    assert state.job_state().failed == Failure(1, "worker-0", exit=3, time=4.0)
    assert state.decided(None).failed is None and state.decided(None).reason is None


def test_nothing_there_is_none_and_a_newer_one_is_refused_naming_the_file(tmp_path) -> None:
    assert nodestate.read(str(tmp_path)) is None
    Path(nodestate.path_in(str(tmp_path))).write_text(json.dumps({"v": 9, "job_id": JOB_ID}))
    with pytest.raises(WireError, match=r"^node 0: .*/state.json: node state is schema version 9"):
        nodestate.read(str(tmp_path), "node 0")


def test_the_status_verbs_view_says_whether_the_supervisor_runs() -> None:
    state = nodestate.NodeState(JOB_ID, supervisor_running=False)
    assert json.loads(state.text())["supervisor"] == "gone"
    assert "supervisor" not in nodestate.NodeState(JOB_ID).to_json()


def test_the_stop_verbs_grace_reaches_the_daemon(tmp_path: Path) -> None:
    assert nodestate.read_stop_grace(str(tmp_path)) is None
    nodestate.write_stop(str(tmp_path), 2.5)
    assert nodestate.read_stop_grace(str(tmp_path)) == 2.5


def test_an_older_watchdog_counts_a_newer_jobs_live_supervisor_as_running(
        tmp_path: Path) -> None:
    old, new = tmp_path / "j-20250101-120000-aaaa", tmp_path / "j-20250101-120000-bbbb"
    for d in (old, new):
        d.mkdir()
    nodestate.write(str(old), nodestate.NodeState(old.name, 0, JobStateName.SUCCEEDED))
    Path(nodestate.path_in(str(new))).write_text(json.dumps({"v": 9, "state": "future"}))
    assert watchdog.jobs_now(str(tmp_path)) == [(old.name, "succeeded", False),
                                                (new.name, "unreadable", False)]
