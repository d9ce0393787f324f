"""cluster/jobs/recovery.py's own parts: which indexes run, what EC2 lists for each, and the command that reads
the newest checkpoint's time on the master (run here by bash on real files)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
