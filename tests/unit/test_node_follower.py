"""node/follower.py, the node-side job reader, run as the client runs it:
``python3 - VERB ...`` with the program on stdin, against a job dir in tmp_path."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterkit.cluster.jobs.nodejobs import FOLLOWER_MODULES
from clusterkit.node import bundle, follower

SOURCE = bundle.program("follower.py", FOLLOWER_MODULES)  # as follower_call sends it


def _run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-", *args], input=SOURCE, capture_output=True,
                          timeout=timeout, check=False)


def _job(tmp_path: Path, state: str) -> Path:
    d = tmp_path / "var/lib/clusterkit/jobs/j-20250101-120000-ab12"
    d.mkdir(parents=True)
    procs = [{"name": "scheduler", "role": "scheduler"}, {"name": "worker-0", "role": "worker"}]
    (d / "job.json").write_text(json.dumps({"processes": procs}))
    (d / "scheduler.log").write_text("s1\n")
    (d / "worker-0.log").write_text("w1\nw2 no newline")
    (d / "state.json").write_text(json.dumps({"state": state, "failed": None}))
    return d


def test_follow_prints_every_line_tagged_then_the_state(tmp_path: Path):
    d = _job(tmp_path, "succeeded")
    out = _run("follow", str(d), "--follow").stdout.decode().splitlines()
    assert out[:-1] == ["Lscheduler\ts1", "Lworker-0\tw1", "Lworker-0\tw2 no newline"]
    assert json.loads(out[-1][1:])["state"] == "succeeded"


def test_follow_tells_each_spot_notice_of_the_node_once(tmp_path: Path):
    d = _job(tmp_path, "running")
    notices = [{"kind": "rebalance", "at": 1.0, "action": None},
               {"kind": "interruption", "at": 2.0, "action": "terminate"}]
    (d / "state.json").write_text(json.dumps({"state": "running", "notices": notices[:1]}))
    told = follower.tell_notices(json.loads((d / "state.json").read_text()), 0)
    assert told == 1
    (d / "state.json").write_text(json.dumps({"state": "succeeded", "notices": notices}))
    out = _run("follow", str(d), "--follow").stdout.decode().splitlines()
    said = [json.loads(line[1:]) for line in out if line.startswith("N")]
    assert said == notices  # a follower of its own tells both, in order, once each
    assert out[-1].startswith("S")


def test_follow_by_role(tmp_path: Path):
    d = _job(tmp_path, "running")
    out = _run("follow", str(d), "--role", "worker").stdout.decode().splitlines()
    assert out[:-1] == ["Lworker-0\tw1", "Lworker-0\tw2 no newline"]  # no --follow: ends


def test_jobs_lists_each_job_with_its_state(tmp_path: Path):
    _job(tmp_path, "failed")
    (lines,) = _run("jobs", str(tmp_path)).stdout.decode().splitlines()
    assert json.loads(lines) == {"job_id": "j-20250101-120000-ab12", "state": "failed",
                                 "failed": None}


def test_prepare_answers_jobs_free_ports_home_hosts_and_the_workdir(tmp_path: Path):
    proc = _run("prepare", "--ports", "3", "--hosts", "--cd", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert isinstance(answer["jobs"], list)  # the real /var/lib/clusterkit/jobs, if any
    assert answer["home"] == str(Path.home())
    assert answer["hosts"] == Path("/etc/hosts").read_text()
    assert answer["cwd"] == str(tmp_path)
    assert len(set(answer["ports"])) == 3
    for port in answer["ports"]:
        with socket.socket() as sock:
            sock.bind(("", port))  # still free


def test_prepare_asks_only_what_it_is_told():
    answer = json.loads(_run("prepare").stdout)
    assert set(answer) == {"jobs", "home"}


def test_prepare_refuses_a_workdir_that_is_not_there(tmp_path: Path):
    proc = _run("prepare", "--cd", str(tmp_path / "gone"))
    assert proc.returncode == 1
    assert b"no such directory on this node" in proc.stderr
    assert proc.stdout == b""


class Clock:
    """A monotonic clock the test moves; select waits record their timeouts and move it
    by them when nothing is ready (no real time passes)."""

    def __init__(self) -> None:
        self.now, self.timeouts = 1000.0, []

    def __call__(self) -> float:
        return self.now

    def select(self, fds, _w, _x, timeout):
        self.timeouts.append(timeout)
        ready = select.select(fds, [], [], 0)[0]  # what inotify has queued right now
        if not ready:
            self.now += timeout
        return ready, [], []


def test_follow_wakes_on_a_change_in_the_job_dir_not_on_a_clock(tmp_path: Path):
    clock = Clock()
    changes = follower.Changes(str(tmp_path), clock, clock.select)
    assert changes.fd is not None  # this kernel has inotify, as the nodes' do
    assert changes.wait() == "quiet"  # nothing changes: one pass per WATCH_WAIT
    assert clock.timeouts == [follower.WATCH_WAIT]
    clock.timeouts.clear()
    (tmp_path / "state.json").write_text("{}")
    assert changes.wait() == "state" and clock.timeouts == [follower.WATCH_WAIT]


def test_a_new_state_is_seen_at_once_and_log_lines_at_most_every_poll(tmp_path: Path):
    clock = Clock()
    changes = follower.Changes(str(tmp_path), clock, clock.select)
    changes.last = clock.now  # a pass just now
    (tmp_path / "worker-0.log").write_text("line\n")  # a busy job: one pass per POLL
    assert changes.wait() == "logs"
    assert clock.timeouts == pytest.approx([follower.WATCH_WAIT, follower.POLL])  # the floor
    assert changes.last == pytest.approx(1000.0 + follower.POLL)
    clock.timeouts.clear()
    clock.now += 5 * follower.POLL  # a quiet while later: the floor is behind
    (tmp_path / "worker-0.log").write_text("more\n")
    assert changes.wait() == "logs"
    assert clock.timeouts == pytest.approx([follower.WATCH_WAIT, 0.0])
    clock.timeouts.clear()
    (tmp_path / "worker-0.log").write_text("again\n")
    (tmp_path / "state.json").write_text("{}")  # the end of the job: no floor
    assert changes.wait() == "state" and clock.timeouts == [follower.WATCH_WAIT]


def test_follow_streams_a_line_and_ends_when_the_state_does(tmp_path: Path):
    d = _job(tmp_path, "running")

    def later() -> None:
        with open(d / "worker-0.log", "a") as log:
            log.write(" then more\nlast\n")
        (d / "state.tmp").write_text(json.dumps({"state": "succeeded", "failed": None}))
        os.replace(d / "state.tmp", d / "state.json")  # as the supervisor writes it

    proc = subprocess.Popen([sys.executable, "-", "follow", str(d), "--follow"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write(SOURCE)
        proc.stdin.close()
        deadline = time.monotonic() + 20
        first = _read(proc, deadline, lines=2)  # its first pass, then it waits for a change
        later()
        out = (first + _read(proc, deadline)).decode().splitlines()
    finally:
        proc.kill()
        proc.wait()
    assert out[:-1] == ["Lscheduler\ts1", "Lworker-0\tw1", "Lworker-0\tw2 no newline then more",
                        "Lworker-0\tlast"]
    assert json.loads(out[-1][1:])["state"] == "succeeded"


def _read(proc: subprocess.Popen, deadline: float, lines: int | None = None) -> bytes:
    """What ``proc`` writes, as it comes: its first ``lines`` lines, or (None) all of it
    up to its end; a failed assertion at ``deadline``."""
    fd, out = proc.stdout.fileno(), b""
    while lines is None or out.count(b"\n") < lines:
        left = deadline - time.monotonic()
        assert left > 0, f"follow wrote only {out!r} in time"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                assert lines is None, f"follow ended after {out!r}"
                break
            out += chunk
    return out


def test_following_tells_each_new_metric_sample_once_rotation_too(tmp_path: Path,
                                                                  capsys) -> None:
    """What was there when following began is `metrics`' to give (`top`); each sample
    written afterwards is one M line, and after a rotation the new file is read from its
    start."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"t": 1}\n')
    tail = follower.MetricsTail(str(path))
    tail.pump()
    with path.open("a") as handle:
        handle.write('{"t": 2}\n{"t": 3')
    tail.pump()
    with path.open("a") as handle:
        handle.write('}\n')
    tail.pump()
    path.rename(tmp_path / "metrics.1.jsonl")
    tail.pump()  # nothing there for a moment
    path.write_text('{"t": 4}\n')
    tail.pump()
    assert capsys.readouterr().out.splitlines() == ['M{"t": 2}', 'M{"t": 3}', 'M{"t": 4}']


@pytest.mark.parametrize("asked", [True, False], ids=["--metrics", "no --metrics"])
def test_following_streams_metric_samples_only_when_asked(tmp_path: Path, asked: bool):
    """`train` asks for the samples written while it follows (its diagnosis); `logs -f`
    does not, and gets none."""
    d = _job(tmp_path, "running")
    (d / "metrics.jsonl").write_text('{"t": 1}\n')  # there before: `top`'s, not told
    args = [sys.executable, "-", "follow", str(d), "--follow", *(["--metrics"] if asked else [])]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(SOURCE)
    proc.stdin.close()
    while b"w1" not in proc.stdout.readline():  # the first pass's last whole line
        pass
    with (d / "worker-0.log").open("a") as log:  # only a later pass, after the first
        log.write("\nw3\n")                    # one looked at the metrics, reads it
    while b"w3" not in proc.stdout.readline():
        pass
    with (d / "metrics.jsonl").open("a") as metrics:
        metrics.write('{"t": 7}\n')  # new since following began: told
    (d / "state.json").write_text(json.dumps({"state": "succeeded", "failed": None}))
    out = proc.stdout.read().decode().splitlines()
    assert proc.wait(timeout=20) == 0
    assert (['M{"t": 7}'] if asked else []) == [line for line in out if line.startswith("M")]
