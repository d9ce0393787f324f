"""The watchdog's daemon logic (clusterkit/autostop/watchdog.py) in process: a master and
two workers wired together without a network, their activity, clock and power-off
injected. What is checked is who powers off, in which order, and what keeps them up."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterkit.node import autostop_policy as policy
from clusterkit.node import link, watchdog
from clusterkit.node.autostop_policy import Config

TOKEN = "k" * 64


class Node:
    """One node's watchdog with a settable activity and a power-off that is recorded."""

    def __init__(self, index: int, now: list[float], order: list[str], state: Path) -> None:
        self.active: list[str] = []
        self.name = "master" if index == 0 else f"worker-{index}"
        cfg = Config(cluster="demo", node=index, nodes=3, master="127.0.0.2", idle_s=20,
                     token=TOKEN, poll_s=5)
        self.dog = watchdog.Watchdog(cfg, probe=lambda: list(self.active),
                                     power=lambda: order.append(self.name) or 0,
                                     clock=lambda: now[0], state_path=str(state))


@pytest.fixture
def cluster(tmp_path: Path):
    now, order = [1000.0], []
    nodes = [Node(i, now, order, tmp_path / "autostop-state.json") for i in range(3)]
    master = nodes[0].dog

    def ask(dog):
        def call(reasons, at):  # the worker's report, through the master's handler
            nonce = "n" * 32
            reply = master.handle(link.sign(TOKEN, policy.report(dog.cfg.node, reasons,
                                                                   nonce, at)))
            if reply is None:
                raise ValueError("refused")
            return policy.check_answer(link.verify(TOKEN, reply, at), nonce)
        return call

    def step(seconds: float) -> list[str]:
        """``seconds`` pass, a tick each second: the master ticks, workers every 5 s."""
        gone = []
        for _ in range(int(seconds)):
            now[0] += 1
            for node in nodes[1:]:
                if node.name not in order and int(now[0]) % 5 == node.dog.cfg.node:
                    node.dog.worker_tick(ask(node.dog))
            if "master" not in order:
                master.master_tick()
            gone = list(order)
        return gone

    return nodes, step, order, tmp_path / "autostop-state.json"


def test_an_idle_cluster_powers_off_workers_first_then_the_master(cluster) -> None:
    nodes, step, order, state = cluster
    assert step(15) == []
    written = json.loads(state.read_text())
    assert written["idle_s"] == 20 and written["decided"] is None
    step(30)
    assert order[-1] == "master" and sorted(order[:-1]) == ["worker-1", "worker-2"]
    written = json.loads(state.read_text())
    assert written["decided"] is not None and written["told"] == [1, 2]


@pytest.mark.parametrize("who", [0, 1, 2])
def test_activity_on_any_node_keeps_the_cluster_up_and_resets_the_clock(cluster, who) -> None:
    nodes, step, order, state = cluster
    nodes[who].active = ["ssh session ubuntu@pts/0"]
    assert step(60) == []
    nodes[who].active = []
    step(5)
    assert order == []  # the clock started again at the last activity
    step(40)
    assert order[-1] == "master" and len(order) == 3


def test_a_worker_that_never_reports_does_not_hold_the_master_forever(cluster) -> None:
    nodes, step, order, _ = cluster
    nodes[2].name = "worker-2"
    order.append("worker-2")  # as if gone already: it never reports
    step(20 + 2 * 5 + policy.TELL_GRACE_S + 5)
    assert order == ["worker-2", "worker-1", "master"]


def test_a_forged_report_is_refused_and_changes_nothing(cluster) -> None:
    nodes, _, _, _ = cluster
    master = nodes[0].dog
    before = master.clock
    forged = link.sign("x" * 64, policy.report(1, ["job j-1 running"], "n" * 32, 1000.0))
    assert master.handle(forged) is None
    assert master.clock == before


def test_a_worker_cut_off_from_the_master_goes_when_idle_long_enough(tmp_path) -> None:
    now, order = [0.0], []
    cfg = Config(cluster="demo", node=1, nodes=2, master="127.0.0.2", idle_s=20, token=TOKEN)
    dog = watchdog.Watchdog(cfg, probe=lambda: [], power=lambda: order.append("w") or 0,
                            clock=lambda: now[0], state_path=str(tmp_path / "s.json"))

    def unreachable(_reasons, _at):
        raise ConnectionRefusedError("refused")

    now[0] = policy.ORPHAN_MIN_S - 1
    assert dog.worker_tick(unreachable) is False
    now[0] = policy.ORPHAN_MIN_S
    assert dog.worker_tick(unreachable) is True and order == ["w"]


def test_a_restarted_master_keeps_its_clock_only_for_the_same_setting(tmp_path) -> None:
    state = tmp_path / "autostop-state.json"
    state.write_text(json.dumps({"idle_s": 20, "action": "terminate", "last_activity": 990.0,
                                 "reason": "job j-1 running", "decided": None, "now": 999.0}))
    cfg = Config(cluster="demo", node=0, nodes=1, master="m", idle_s=20, token=TOKEN)
    kept = watchdog.Watchdog(cfg, probe=list, clock=lambda: 1000.0, state_path=str(state))
    assert kept.clock.last_activity == 990.0
    other = Config(cluster="demo", node=0, nodes=1, master="m", idle_s=60, token=TOKEN)
    fresh = watchdog.Watchdog(other, probe=list, clock=lambda: 1000.0, state_path=str(state))
    assert fresh.clock.last_activity == 1000.0
    stale = watchdog.Watchdog(cfg, probe=list, clock=lambda: 5000.0, state_path=str(state))
    assert stale.clock.last_activity == 5000.0  # the old daemon is long gone (a reboot)


def test_jobs_on_the_node_count_only_with_a_live_supervisor(tmp_path) -> None:
    jobs = tmp_path / "jobs"
    for job, state, pid in (("j-20250101-000000-aaaa", "running", os.getpid()),
                            ("j-20250101-000000-bbbb", "running", 999999999)):
        (jobs / job).mkdir(parents=True)
        (jobs / job / "state.json").write_text(json.dumps({"state": state}))
        (jobs / job / "supervisor.pid").write_text(f"{pid}\n")
    found = watchdog.jobs_now(str(jobs))
    # this test process is not a supervisor.py of that job: neither counts as alive
    assert found == [("j-20250101-000000-aaaa", "running", False),
                     ("j-20250101-000000-bbbb", "running", False)]


def test_the_power_off_under_a_test_root_is_recorded_never_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(watchdog.ROOT_ENV, str(tmp_path))
    (tmp_path / "var/lib/clusterkit").mkdir(parents=True)
    assert watchdog.power_off() == 0
    assert (tmp_path / "var/lib/clusterkit/poweroff-requested").read_text() == \
        "shutdown -h now\n"
