"""node/procgroup.py alone: the job's processes started, reaped with their exit
records, given the checkpoint signal (sparing launchers, schedulers and servers) and
stopped TERM -> grace -> KILL. Real (tiny) processes, no cgroup, no root."""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

import pytest

from clusterkit.node import procgroup
from clusterkit.node.jobfile import JobFile
from clusterkit.node.jobstate import ProcStateName
from tests.support import wait_for

# this process's own job id: the group's stop kills every process whose environment
# names it, so a fixed id shared with another test (the torchrun example's) would kill
# that test's processes when both run at once
JOB_ID = f"j-20240202-000000-{secrets.token_hex(2)}"
# saves on the checkpoint signal (a file), then exits 0; ignores nothing else; {1}: its
# traps are set
SAVER = 'trap "echo saved > {0}; exit 0" USR1; touch {1}; while :; do sleep 0.05; done'


def _group(tmp_path: Path, procs: list, **job: object) -> procgroup.ProcessGroup:
    data = {"job_id": JOB_ID, "node_index": 1, "processes": procs, **job}
    return procgroup.ProcessGroup(JobFile.from_json(data, "t"), str(tmp_path))


def _env(proc: procgroup.Proc) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTERKIT_JOB_ID": JOB_ID,
            "CLUSTERKIT_NODE_RANK": "1"}


def _stop(group: procgroup.ProcessGroup, timeout: float = 10) -> None:
    """The supervisor's loop, as far as the group goes: reap, then step the stop."""
    wait_for(lambda: group.poll() is None or group.step_stop(time.monotonic()) or group.gone,
             "stopped", timeout)


def test_each_process_gets_an_exit_record_and_a_view(tmp_path: Path):
    group = _group(tmp_path, [{"name": "worker-0", "argv": ["sh", "-c", "exit 3"]},
                              {"name": "sleeper", "role": "server", "argv": ["sleep", "30"]}])
    group.start(_env)
    ended: list = []
    wait_for(lambda: ended.extend(group.poll()) or ended, "worker-0 exits")
    assert [p.name for p in ended] == ["worker-0"] and group.poll() == []
    assert procgroup.exit_code(str(tmp_path), "worker-0") == 3
    assert procgroup.exit_code(str(tmp_path), "sleeper") is None
    views = group.views()
    assert views["worker-0"]["state"] == "exited" and views["worker-0"]["exit"] == 3
    assert views["sleeper"]["state"] == "running" and views["sleeper"]["role"] == "server"
    assert [s.state for s in group.states()] == [ProcStateName.RUNNING, ProcStateName.EXITED]
    assert group.begin_stop() is None  # SIGTERM now
    _stop(group)
    assert group.procs[1].exit == -signal.SIGTERM


def test_a_process_that_cannot_start_exits_127(tmp_path: Path):
    group = _group(tmp_path, [{"name": "worker-0", "argv": ["/no/such/program"]}])
    group.start(_env)
    assert group.procs[0].exit == 127 and group.pgids() == set()
    assert "cannot start worker-0" in (tmp_path / "worker-0.log").read_text()


def test_the_checkpoint_signal_spares_servers_and_the_stop_waits_no_longer_than_saving(
        tmp_path: Path):
    group = _group(tmp_path, [
        {"name": "worker-0", "argv": ["sh", "-c", SAVER.format(tmp_path / "w.saved",
                                                            tmp_path / "w.ready")]},
        {"name": "server-0", "role": "server",
         "argv": ["sh", "-c", SAVER.format(tmp_path / "s.saved", tmp_path / "s.ready")]}],
        grace_seconds=30)
    group.start(_env)
    wait_for(lambda: (tmp_path / "w.ready").exists() and (tmp_path / "s.ready").exists(),
             "the traps set")
    left = group.begin_stop(checkpoint_for=60.0)
    assert left is not None and left > 50
    # the worker saved and exited: SIGTERM at once, within the wait, not in 60 s
    _stop(group, timeout=20)
    assert (tmp_path / "w.saved").exists() and not (tmp_path / "s.saved").exists()


def test_what_ignores_sigterm_is_killed_once_the_grace_is_over(tmp_path: Path):
    group = _group(tmp_path, [{"name": "worker-0", "argv": [
        "sh", "-c", f'trap "" TERM; touch {tmp_path / "ready"}; while :; do sleep 0.05; done']}],
        grace_seconds=0.5)
    group.start(_env)
    wait_for(lambda: (tmp_path / "ready").exists(), "the trap set")
    group.begin_stop()
    _stop(group)
    assert group.procs[0].exit == -signal.SIGKILL


def test_the_checkpoint_signal_is_one_this_python_knows():
    assert procgroup.checkpoint_signal(None) is signal.SIGUSR1
    assert procgroup.checkpoint_signal("SIGUSR2") is signal.SIGUSR2
    with pytest.raises(ValueError, match="bad checkpoint_signal"):
        procgroup.checkpoint_signal("SIGNOPE")
