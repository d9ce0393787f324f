"""Autostop end to end in the sandbox: a 2-node cluster with ``autostop: 15s``. An open
`clusterkit ssh` session (on the worker, through the master) keeps it up past the idle
time, so does a running job; once idle, each node's OS powers off through the sandbox's
``shutdown`` shim (the watchdog calls ``shutdown -h now``, as on Ubuntu), workers first,
the agent terminates each instance as its InstanceInitiatedShutdownBehavior says, and
`status` says the cluster autostopped and what is left; `up` brings it back.

One test walks the whole life of one cluster, step by step (tests run in random order,
and each step starts where the last one ended): economical, one `up`, one session, one
job, one autostop, one `up` again."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit.aws import instances
from clusterkit.cluster.ops.status import do_status
from clusterkit.cluster.provision.up import do_up
from tests import support
from tests.e2e.clusters import running, user_session
from tests.e2e.test_train import CLI, Cluster, new_cluster
from tests.integration.conftest import runtime

IDLE = 15


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("autostop")
    cl = new_cluster(where, support.unique_name("as"), count=2)
    cl.spec.write_text(cl.spec.read_text() + f"autostop: {IDLE}s\n")
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def live(name: str) -> list[instances.Node]:
    return instances.cluster_instances(runtime().session, "us-east-1", name)


def clock(name: str):
    return do_status(name, rt=runtime()).autostop


def hold(name: str, why: str) -> None:
    """Longer than the idle time passes with ``why`` seen by the master: every node runs
    all along."""
    support.wait_for(lambda: why in (getattr(clock(name), "reason", None) or ""),
                     f"the master sees {why}", 30, interval=1)
    deadline = time.monotonic() + IDLE + 8
    while time.monotonic() < deadline:
        states = [n.state for n in live(name)]
        assert states == ["running", "running"], states
        time.sleep(2)


def test_an_idle_cluster_stops_itself_unless_a_session_or_a_job_holds_it(
        sandbox, cluster: Cluster) -> None:
    up_sets_up_autostop_on_every_node(cluster)
    the_autostop_command_changes_the_setting_and_turns_it_off(cluster)
    an_open_ssh_session_on_a_worker_keeps_the_cluster_up(cluster)
    a_running_job_keeps_the_cluster_up(cluster)
    an_idle_cluster_powers_itself_off_workers_first(sandbox, cluster)
    the_autostop_command_finds_the_autostopped_cluster(cluster)
    status_says_it_autostopped_and_up_brings_it_back(cluster)


def up_sets_up_autostop_on_every_node(cluster: Cluster) -> None:
    now = clock(cluster.name)
    assert now is not None and now.running and now.idle_s == IDLE
    assert now.action == "terminate" and 0 < (now.left_s or 0) <= IDLE
    tags = [n.tags.get("clusterkit:on-shutdown") for n in live(cluster.name)]
    assert tags == ["terminate", "terminate"]


def autostop_cli(name: str, *args: str) -> dict:
    done = subprocess.run([CLI, "--json", "autostop", name, *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=os.environ.copy())
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def the_autostop_command_changes_the_setting_and_turns_it_off(cluster: Cluster) -> None:
    """`autostop NAME 1h --action stop`, again (nothing to change), `off`, then back to
    the spec's 15s, terminate."""
    ids = sorted(n.instance_id for n in live(cluster.name))
    changed = autostop_cli(cluster.name, "1h", "--action", "stop")
    assert (changed["idle_s"], changed["action"]) == (3600, "stop")
    assert sorted(changed["behaviour_changed"]) == ids
    assert changed["nodes"] == {"master": "started", "worker-1": "started"}
    assert [n.tags.get("clusterkit:on-shutdown") for n in live(cluster.name)] == ["stop"] * 2
    assert autostop_cli(cluster.name, "1h", "--action", "stop")["behaviour_changed"] == []
    off = autostop_cli(cluster.name, "off")
    assert off["idle_s"] is None and set(off["nodes"].values()) == {"off"}
    assert clock(cluster.name) is None
    back = autostop_cli(cluster.name, f"{IDLE}s", "--action", "terminate")
    assert sorted(back["behaviour_changed"]) == ids and back["clock"]["running"]


def an_open_ssh_session_on_a_worker_keeps_the_cluster_up(cluster: Cluster) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([CLI, "ssh", cluster.name, "worker-1"], stdin=follower,
                            stdout=follower, stderr=follower, env=os.environ.copy(),
                            start_new_session=True)
    os.close(follower)
    seen = bytearray()
    reader = threading.Thread(target=_drain, args=(leader, seen), daemon=True)
    reader.start()
    try:
        hold(cluster.name, "worker-1: ssh session")
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc}; the session printed: {bytes(seen)!r}") from exc
    finally:
        os.write(leader, b"exit\n")
        proc.wait(20)
        os.close(leader)


def _drain(fd: int, into: bytearray) -> None:
    """What the session prints (the pty must be read, or its output blocks it)."""
    try:
        while chunk := os.read(fd, 4096):
            into += chunk
    except OSError:
        pass


def a_running_job_keeps_the_cluster_up(cluster: Cluster) -> None:
    out = io.StringIO()
    done: list = []
    thread = threading.Thread(target=lambda: done.append(
        cluster.train(f"sleep {IDLE + 15}", out=out)))
    thread.start()
    try:
        hold(cluster.name, "job j-")
    finally:
        thread.join(120)
    assert done and done[0].state == "succeeded", out.getvalue()


def an_idle_cluster_powers_itself_off_workers_first(sandbox, cluster: Cluster) -> None:
    support.wait_for(lambda: not live(cluster.name), "every instance gone", 60, interval=1)
    records = [json.loads(line) for line in
               (Path(sandbox.dir) / "run/power-offs.jsonl").read_text().splitlines()]
    mine = sorted((r for r in records if r["cluster"] == cluster.name),
                  key=lambda r: r["time"])
    # the shim in each node's own root is what ran: the watchdog's `shutdown -h now`
    assert [(r["index"], r["command"], r["action"]) for r in mine] == [
        (1, "shutdown -h now", "terminate"), (0, "shutdown -h now", "terminate")]
    result = do_status(cluster.name, rt=runtime())
    assert result.nodes == [] and result.remains is not None
    assert result.remains.autostopped and result.remains.stack
    assert sorted(result.remains.terminated) == sorted(
        r["instance_id"] for r in mine)


def the_autostop_command_finds_the_autostopped_cluster(cluster: Cluster) -> None:
    """As `status` does (issue 36: `no cluster NAME`, exit 1): `off` says there is
    nothing to turn off and how to bring it back without autostop; a duration has no
    node to go on (exit 1, how to bring it back with it); `-5m` is no duration (exit 2)."""
    def run(*args: str, target: str = cluster.name) -> subprocess.CompletedProcess:
        return subprocess.run([CLI, "autostop", target, *args], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL,
                              env=os.environ.copy())

    off = run("off")
    assert off.returncode == 0, off.stdout + off.stderr
    said = [  # the renderer wraps lines at the terminal's width: compare words
        f"cluster {cluster.name} autostopped: its nodes shut themselves down when it was idle",
        "autostop off: no node runs, so no watchdog runs: nothing to turn off, nothing was "
        "changed",
        "to bring it back without autostop: `clusterkit up SPEC --autostop off` (a plain "
        "`up` sets autostop up again: the spec's, else the one it had)"]
    assert off.stdout.split() == " ".join(said).split(), off.stdout
    by_spec = run("off", "--json", target=str(cluster.spec))
    assert by_spec.returncode == 0 and json.loads(by_spec.stdout)["remains"]["autostopped"]
    on = run("30m")
    assert on.returncode == 1 and "no node runs to set autostop on" in on.stderr, on.stderr
    assert "`clusterkit up SPEC --autostop 30m`" in on.stderr
    negative = run("-5m")
    assert negative.returncode == 2 and "not a duration: '-5m'" in negative.stderr


def status_says_it_autostopped_and_up_brings_it_back(cluster: Cluster) -> None:
    shown = subprocess.run([CLI, "status", cluster.name], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert shown.returncode == 0, shown.stderr
    assert f"cluster {cluster.name} autostopped" in shown.stdout, shown.stdout
    assert f"clusterkit down {cluster.name}" in shown.stdout
    back = do_up(str(cluster.spec), yes=True, rt=runtime(), timeout=180)
    assert len(back.nodes) == 2 and back.autostop is not None
    assert back.autostop.clock is not None and back.autostop.clock.running

