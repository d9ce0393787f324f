"""cluster/jobs/standby.py's bookkeeping, with the launch replaced by a function that
returns a node at once (the launch itself runs in tests/e2e/test_train_recovery.py) and
timers the test fires: a rebalance recommendation starts one standby per node, a notice
takes it, the standby time or the job's end terminates what is left."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from clusterkit.cluster.jobs import standby as sb
from clusterkit.cluster.jobs.attempt import Job
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.kinds import InstanceState
from clusterkit.plan.nodes import Node
from clusterkit.spec import loads

SPEC = loads("name: demo\nregion: us-east-1\nnodes: {count: 3, instance_types: [c5.large]}\n"
             "train: {command: python3 train.py, max_recoveries: 2}\n")
REBALANCE = {"kind": "rebalance", "at": 1.0, "action": None}


class FakeTimer:
    made: list[FakeTimer] = []

    def __init__(self, seconds: float, call: Callable[..., None], args: tuple) -> None:
        self.seconds, self.call, self.args, self.cancelled = seconds, call, args, False
        self.daemon = False
        FakeTimer.made.append(self)

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.call(*self.args)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    record: dict[str, Any] = {"prepared": [], "terminated": []}
    monkeypatch.setattr(sb.instances, "terminate_instances",
                        lambda _s, _r, ids: record["terminated"].extend(ids))
    FakeTimer.made = []
    return record


def standbys(made: dict[str, Any], fail: bool = False, gate: threading.Event | None = None,
             ) -> sb.Standbys:
    def prepare(_rt: Runtime, _job: Job, index: int) -> Node:
        if gate is not None:
            gate.wait(10)
        made["prepared"].append(index)
        if fail:
            raise ClusterkitError("no capacity")
        return Node(f"i-standby{index}", None, InstanceState.RUNNING, "c5.large",
                    "us-east-1a", "spot", "us-east-1")

    job = Job("demo.yaml", SPEC, "python3 train.py", None, None)
    return sb.Standbys(Runtime.make(session=object()), job, minutes=30, prepare=prepare,
                       timer=FakeTimer)


def test_node_names_are_indexes():
    assert [sb.node_index(n) for n in ("master", "worker-2", "worker-x", "w-1")] == [
        0, 2, None, None]


def test_a_rebalance_recommendation_boots_one_standby_that_the_notice_takes(made):
    s = standbys(made)
    s.on_notice("worker-2", REBALANCE)
    s.on_notice("worker-2", REBALANCE)  # said again: still one
    s.on_notice("worker-1", {"kind": "interruption", "at": 2.0})  # not a recommendation
    taken = s.take(2)
    assert taken is not None and taken.instance_id == "i-standby2"
    assert made["prepared"] == [2]
    assert [t.seconds for t in FakeTimer.made] == [1800] and FakeTimer.made[0].cancelled
    assert s.take(2) is None and s.take(1) is None
    s.close()
    assert made["terminated"] == []  # the one taken is the cluster's node now


def test_a_standby_still_booting_is_waited_for(made):
    gate = threading.Event()
    s = standbys(made, gate=gate)
    s.on_notice("worker-1", REBALANCE)
    threading.Timer(0.2, gate.set).start()
    taken = s.take(1)
    assert taken is not None and taken.instance_id == "i-standby1"


def test_no_notice_within_the_standby_time_terminates_it(made):
    s = standbys(made)
    s.on_notice("master", REBALANCE)
    s.booting[0].join(10)
    FakeTimer.made[0].fire()
    assert made["terminated"] == ["i-standby0"] and s.take(0) is None


def test_the_jobs_end_terminates_every_standby_left(made):
    s = standbys(made)
    s.on_notice("worker-1", REBALANCE)
    s.booting[1].join(10)
    s.close()
    assert made["terminated"] == ["i-standby1"] and FakeTimer.made[0].cancelled
    s.on_notice("worker-2", REBALANCE)  # after the end: none
    assert made["prepared"] == [1]


def test_a_standby_that_booted_after_the_end_is_terminated_at_once(made):
    gate = threading.Event()
    s = standbys(made, gate=gate)
    s.on_notice("worker-2", REBALANCE)
    s.close()
    gate.set()
    s.booting[2].join(10)
    assert made["terminated"] == ["i-standby2"]


def test_a_failed_standby_is_said_and_the_recovery_launches_instead(made):
    s = standbys(made, fail=True)
    s.on_notice("worker-1", REBALANCE)
    assert s.take(1) is None and made["prepared"] == [1]
