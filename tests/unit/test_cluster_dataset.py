"""deploy-dataset's waits on volumes: one DescribeVolumes a round for every volume, the
rounds short at first and growing to the runtime's poll, and a deadline that names the
volumes not ready. AWS's volume states over time ("creating" for a few seconds) cannot
be had from moto, which answers every volume ready at once, so DescribeVolumes is
replaced here by a scripted sequence of answers; the clock is a fake one."""

from __future__ import annotations

import pytest

from clusterkit.cluster.dataset import deploy as dataset
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError
from clusterkit.plan.dataset import Clone


def _clone(vol: str, state: str) -> Clone:
    return Clone(vol, "snap-0123456789abcdef0", "us-east-1a", state, 1, None, None, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _scripted(monkeypatch: pytest.MonkeyPatch, rounds: list[list[Clone]]) -> list[list[str]]:
    asked: list[list[str]] = []

    def describe(session, region, ids):
        asked.append(list(ids))
        return rounds[min(len(asked), len(rounds)) - 1]

    monkeypatch.setattr(dataset.volumes, "describe_clones", describe)
    return asked


def _runtime(clock: Clock, poll: float = 2.0) -> Runtime:
    return Runtime(session=None, poll=poll, sleep=clock.sleep, clock=lambda: clock.now)


def test_wait_asks_for_every_volume_at_once_with_growing_intervals(monkeypatch) -> None:
    ids = ["vol-01", "vol-02", "vol-03"]
    creating = [_clone(v, "creating") for v in ids]
    ready = [_clone(v, "available") for v in ids]
    asked = _scripted(monkeypatch, [creating] * 7 + [ready])
    clock = Clock()
    found = dataset._wait(_runtime(clock), "us-east-1", ids,
                          lambda c: c.state == "available", "available", deadline=60)
    assert found == ready and asked == [ids] * 8
    assert clock.slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])


def test_wait_ready_at_once_does_not_sleep(monkeypatch) -> None:
    _scripted(monkeypatch, [[_clone("vol-01", "in-use")]])
    clock = Clock()
    dataset._wait(_runtime(clock), "us-east-1", ["vol-01"], lambda c: c.state == "in-use",
                  "attached", deadline=60)
    assert clock.slept == []


def test_a_short_poll_caps_the_first_interval_too(monkeypatch) -> None:
    _scripted(monkeypatch, [[], [_clone("vol-01", "available")]])  # not visible at first
    clock = Clock()
    dataset._wait(_runtime(clock, poll=0.05), "us-east-1", ["vol-01"],
                  lambda c: c.state == "available", "available", deadline=60)
    assert clock.slept == [0.05]


def test_the_deadline_names_the_volumes_not_ready(monkeypatch) -> None:
    _scripted(monkeypatch, [[_clone("vol-01", "available"), _clone("vol-02", "creating")]])
    clock = Clock()
    with pytest.raises(AwsError) as err:
        dataset._wait(_runtime(clock), "us-east-1", ["vol-01", "vol-02"],
                      lambda c: c.state == "available", "available", deadline=10)
    assert "vol-02" in err.value.message and "vol-01" not in err.value.message
    assert "again to resume" in err.value.hint
    assert clock.now >= 10


def test_provision_sets_the_flag_on_a_kept_clone_without_it(monkeypatch) -> None:
    """Node 0 kept as is, node 1 kept but its attachment would outlive the instance (AWS
    says DeleteOnTermination false; moto never reports the flag), node 2 new: the calls
    that change something are node 2's three and node 1's flag, on its own device."""
    import dataclasses

    from clusterkit.events import Collect
    from clusterkit.plan import dataset as pd
    from clusterkit.spec.model import Dataset

    slots = [pd.NodeSlot(i, f"i-{i}", "us-east-1a") for i in range(3)]
    kept = [dataclasses.replace(_clone(f"vol-{i}", "in-use"), instance_id=f"i-{i}",
                                device=f"/dev/sd{'fg'[i]}", delete_on_termination=flag)
            for i, flag in ((0, True), (1, False))]
    plan = pd.plan_deploy("snap-0123456789abcdef0", slots, kept)
    calls: list[tuple] = []
    fake = dataset.volumes
    monkeypatch.setattr(fake, "create_clone", lambda *a, **kw: calls.append(
        ("create", kw["az"])) or "vol-2")
    monkeypatch.setattr(fake, "attach_volume", lambda s, r, vol, iid, dev: calls.append(
        ("attach", vol, iid)))
    monkeypatch.setattr(fake, "delete_on_termination", lambda s, r, iid, dev: calls.append(
        ("flag", iid, dev)))
    monkeypatch.setattr(fake, "describe_clones", lambda s, r, ids: [dataclasses.replace(
        _clone("vol-2", "in-use"), instance_id="i-2")])
    made = dataset._Made()
    rt = Runtime(session=None, report=Collect())
    spec = type("S", (), {"name": "c", "tags": {},
                          "storage": type("St", (), {"kms_key": None})()})()
    monkeypatch.setattr(dataset, "base_tags", lambda spec: {"clusterkit:cluster": "c"})
    out = dataset._provision(rt, spec, "us-east-1", Dataset(), "snap-0123456789abcdef0", 1,
                             slots, plan, made, deadline=60)
    assert out == {0: "vol-0", 1: "vol-1", 2: "vol-2"}
    assert sorted(calls) == [("attach", "vol-2", "i-2"), ("create", "us-east-1a"),
                             ("flag", "i-1", "/dev/sdg"), ("flag", "i-2", "/dev/sdf")]
    assert [made.action(i) for i in range(3)] == ["kept", "settled", "created"]
    assert sorted(e.done for e in rt.report.events if e.done) == [2, 3]


def test_each_volume_is_attached_as_soon_as_it_is_available(monkeypatch) -> None:
    """vol-01 is available at the first round, vol-02 only at the third: vol-01 is
    attached at once, not when vol-02 is; each round asks only for those still waiting."""
    from clusterkit.plan import dataset as pd

    asked = _scripted(monkeypatch, [
        [_clone("vol-01", "available"), _clone("vol-02", "creating")],
        [_clone("vol-02", "creating")],
        [_clone("vol-02", "available")]])
    order: list[tuple[str, int]] = []
    monkeypatch.setattr(dataset.volumes, "attach_volume", lambda s, r, vol, iid, dev:
                        order.append((vol, len(asked))))
    made = dataset._Made()
    slots = {"vol-01": pd.NodeSlot(0, "i-0", "us-east-1a"),
             "vol-02": pd.NodeSlot(1, "i-1", "us-east-1a")}
    clock = Clock()
    dataset._attach_when_ready(_runtime(clock), "us-east-1", slots, made, deadline=60)
    assert order == [("vol-01", 1), ("vol-02", 3)]  # (volume, the round it was attached in)
    assert asked == [["vol-01", "vol-02"], ["vol-02"], ["vol-02"]]
    assert made.attached == {0, 1}
    assert clock.slept == pytest.approx([0.1, 0.2])


def test_a_volume_never_available_is_named_at_the_deadline(monkeypatch) -> None:
    from clusterkit.plan import dataset as pd

    _scripted(monkeypatch, [[_clone("vol-02", "creating")]])
    monkeypatch.setattr(dataset.volumes, "attach_volume", lambda *a: None)
    with pytest.raises(AwsError) as err:
        dataset._attach_when_ready(_runtime(Clock()), "us-east-1",
                                   {"vol-02": pd.NodeSlot(1, "i-1", "us-east-1a")},
                                   dataset._Made(), deadline=10)
    assert "vol-02" in err.value.message and "again to resume" in err.value.hint
