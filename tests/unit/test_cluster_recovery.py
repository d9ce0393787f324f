"""cluster/jobs/recovery.py's own parts: which indexes run, what EC2 lists for each, and the command that reads
the newest checkpoint's time on the master (run here by bash on real files)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clusterkit.cluster.jobs.recovery import ec2_view, newest_file_command, running_by_index
from clusterkit.kinds import InstanceState
from clusterkit.plan.evidence import Check, Ec2Seen
from clusterkit.plan.nodes import Node


def node(iid: str, index: int | None, state: InstanceState) -> Node:
    return Node(iid, index, state, "c5.large", "us-east-1a", "spot", "us-east-1", "2026-01-01")


def test_an_index_runs_when_one_of_its_instances_does():
    nodes = [node("i-0", 0, InstanceState.RUNNING), node("i-1", 1, InstanceState.SHUTTING_DOWN),
             node("i-2", 2, InstanceState.STOPPED), node("i-x", None, InstanceState.RUNNING)]
    assert running_by_index(nodes, 4) == {0: True, 1: False, 2: False, 3: False}


def newest(directory: str, home: Path) -> str:
    return subprocess.run(["bash", "-c", newest_file_command(directory)], text=True,
                          capture_output=True, check=True,
                          env={**os.environ, "HOME": str(home)}).stdout.strip()


def test_the_newest_checkpoint_time_is_the_newest_files_mtime(tmp_path: Path):
    ckpt = tmp_path / "ckpt dir"
    (ckpt / "shard").mkdir(parents=True)
    for name, when in (("ckpt-1.json", 1000), ("shard/part-0", 3000), (".tmp-9", 9000),
                       ("ckpt-2.json", 2000)):
        (ckpt / name).write_text("x")
        os.utime(ckpt / name, (when, when))
    assert float(newest(str(ckpt), tmp_path)) == 3000  # a hidden temp file is not one
    assert float(newest("~/ckpt dir", tmp_path)) == 3000


def test_no_checkpoint_prints_nothing(tmp_path: Path):
    assert newest(str(tmp_path / "none"), tmp_path) == ""


def test_the_directory_is_a_path_never_shell_text(tmp_path: Path):
    odd = tmp_path / "$(touch pwned) x"
    odd.mkdir()
    (odd / "ckpt-1").write_text("x")
    os.utime(odd / "ckpt-1", (1234, 1234))
    assert float(newest(str(odd), tmp_path)) == 1234
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_ec2_view_takes_each_indexs_most_alive_instance_and_none_when_ec2_did_not_answer():
    nodes = [node("i-1a", 1, InstanceState.TERMINATED), node("i-1b", 1, InstanceState.PENDING),
             node("i-2", 2, InstanceState.STOPPING), node("i-x", None, InstanceState.PENDING)]
    view = ec2_view(nodes, 4)
    assert view == {0: Ec2Seen(None), 1: Ec2Seen(InstanceState.PENDING),
                    2: Ec2Seen(InstanceState.STOPPING), 3: Ec2Seen(None)}
    assert ec2_view(None, 4) is None


def test_ec2_view_carries_each_running_instances_status_check():
    nodes = [node("i-0", 0, InstanceState.RUNNING), node("i-1", 1, InstanceState.RUNNING),
             node("i-2", 2, InstanceState.RUNNING)]
    view = ec2_view(nodes, 3, {"i-0": "ok", "i-1": "impaired", "i-2": "some-new-value"})
    assert view == {0: Ec2Seen(InstanceState.RUNNING, Check.OK),
                    1: Ec2Seen(InstanceState.RUNNING, Check.IMPAIRED),
                    2: Ec2Seen(InstanceState.RUNNING)}  # not a value EC2 defines: unknown


def test_following_again_goes_on_while_the_master_drops_the_connection_until_node_timeout():
    """issue 42: the client's own network down (its connections dropped, or not opened)
    says nothing of any node: `train` follows the job again until the master says how it
    ended, trying for train.node_timeout; past it, the job is left as it was."""
    from types import SimpleNamespace

    from clusterkit.cluster.jobs import recovery
    from clusterkit.cluster.jobs.results import JobOutcome
    from clusterkit.cluster.runtime import Runtime
    from clusterkit.errors import RemoteError
    from clusterkit.events import Event
    from clusterkit.node.jobstate import JobStateName
    from clusterkit.training.jobfiles import state_of

    now = [0.0]
    events: list[Event] = []
    rt = Runtime(session=None, report=events.append, poll=1.0, clock=lambda: now[0],
                 sleep=lambda s: now.__setitem__(0, now[0] + s))
    job = SimpleNamespace(spec=SimpleNamespace(train=SimpleNamespace(node_timeout=60.0)),
                          spec_file="c.yaml", region=None)
    lost = JobOutcome("c1", "j-1", JobStateName.UNKNOWN, None, None, ())
    ended = JobOutcome("c1", "j-1", JobStateName.SUCCEEDED, None, None, (),
                       final=state_of({"job_id": "j-1", "state": "succeeded"}))
    tries: list[float] = []

    def follow(*_args: object, **_options: object) -> JobOutcome:
        tries.append(now[0])
        if now[0] < 30:  # the network down for 30 s: refused, or dropped at once
            if len(tries) % 2:
                raise RemoteError("master: cannot connect: Network is unreachable")
            return lost
        return ended

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery.jobs, "open_job_cluster", lambda *_args: None)
        mp.setattr(recovery, "follow_job", follow)
        assert recovery._follow_again(rt, job, lost, None, lambda _j: True, None) is ended
        assert tries[-1] == 30.0 and len(tries) == 31
        now[0], tries[:] = 100.0, []  # never back within node_timeout: left as it was
        mp.setattr(recovery, "follow_job", lambda *_a, **_o: tries.append(now[0]) or lost)
        assert recovery._follow_again(rt, job, lost, None, lambda _j: True, None) is lost
        assert tries[0] == 100.0 and tries[-1] == 160.0
    said = [e.text for e in events]
    assert said[-1] == ("the master still does not answer: the connection dropped before "
                        "it said how the job ended")
