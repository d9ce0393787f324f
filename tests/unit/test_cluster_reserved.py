"""cluster.provision.reserved: `up` on a Capacity Block that has not started waits for
the start on the runtime's clock (a fake one here: no test waits in real time), says
the start and counts down, reads the block again once it started and checks it as the
plan did; `--no-wait` exits 1 with the start time; a refused reservation is exit 2
before anything. DescribeCapacityReservations is a stand-in answering by the fake date
(the emulator's half is tests/integration/test_reserved_capacity.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterkit.cluster.provision import reserved
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, SpecError
from clusterkit.kinds import ReservationKind, ReservationState
from clusterkit.plan.reservation import Reservation
from clusterkit.plan.up import plan_up
from clusterkit.spec import loads
from tests import support

T0 = 1767225600.0  # 2026-01-01 00:00 UTC
SPEC = ("name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [p5.48xlarge], "
        "market: capacity-block, capacity_reservation: cr-0123456789abcdef0}\n")


class FakeTime:
    """The runtime's clocks and sleep: sleeping moves both, nothing waits."""

    def __init__(self) -> None:
        self.now, self.slept = T0, []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _block(**kw) -> Reservation:
    values = {"reservation_id": "cr-0123456789abcdef0", "region": "us-east-1",
              "instance_type": "p5.48xlarge", "az": "us-east-1a", "az_id": "use1-az6",
              "total": 2, "available": 2, "state": ReservationState.SCHEDULED,
              "kind": ReservationKind.CAPACITY_BLOCK, "start": T0 + 1500,
              "end": T0 + 90000, "read_at": T0}
    return Reservation(**{**values, **kw})


def _setup(monkeypatch, available_after: int = 2):
    fake, said = FakeTime(), []
    rt = Runtime(session=None, report=lambda e: said.append(e.text), poll=30.0,
                 sleep=fake.sleep, clock=lambda: fake.now, wall=lambda: fake.now)

    def describe(_session, _region, _rid, read_at):
        started = read_at >= T0 + 1560  # EC2 flips it a minute after the start
        return _block(read_at=read_at, state=ReservationState.ACTIVE if started
                      else ReservationState.SCHEDULED,
                      available=available_after if started else 2)

    monkeypatch.setattr(reserved, "describe_reservation", describe)
    spec = loads(SPEC)
    plan = plan_up(spec, replace(support.observed(spec), reservation=_block()))
    return rt, fake, said, spec, plan


def test_up_waits_for_the_start_counting_down_then_reads_it_again(monkeypatch):
    rt, fake, said, spec, plan = _setup(monkeypatch)
    reserved.refuse(plan, wait=True)  # nothing to refuse: a block not started is waited for
    assert reserved.wait_for_start(rt, spec, plan) is True
    assert said[0] == ("capacity block cr-0123456789abcdef0 starts at 2026-01-01 00:25 UTC: "
                       "waiting 25m 00s (Ctrl-C stops the wait; nothing is made before the "
                       "start)")
    assert "capacity block cr-0123456789abcdef0 starts in 15m 00s" in said
    assert fake.slept[:3] == [600.0, 600.0, 300.0]  # a countdown line every ten minutes
    assert fake.now >= T0 + 1560 and said[-1].endswith("is active: 2 of 2 available")


def test_no_wait_exits_1_with_the_start_time_and_nothing_waited(monkeypatch):
    rt, fake, _said, _spec, plan = _setup(monkeypatch)
    with pytest.raises(ClusterkitError) as err:
        reserved.refuse(plan, wait=False)
    assert err.value.exit_code == 1
    assert "starts at 2026-01-01 00:25 UTC (in 25m 00s): nothing was changed" in str(err.value)
    assert "after 2026-01-01 00:25 UTC" in (err.value.hint or "") and fake.slept == []


def test_a_block_that_shrank_while_up_waited_is_refused_after_the_wait(monkeypatch):
    rt, _fake, _said, spec, plan = _setup(monkeypatch, available_after=1)
    with pytest.raises(SpecError) as err:
        reserved.wait_for_start(rt, spec, plan)
    assert err.value.exit_code == 2
    assert "1 of its 2 instance(s) are available, `up` launches 2" in err.value.issues[0].message


def test_a_refused_plan_is_exit_2_before_anything_and_nothing_else_waits(monkeypatch):
    rt, fake, _said, spec, plan = _setup(monkeypatch)
    expired = plan_up(spec, replace(support.observed(spec), reservation=_block(
        state=ReservationState.EXPIRED)))
    with pytest.raises(SpecError) as err:
        reserved.refuse(expired)
    assert err.value.exit_code == 2 and "expired, not active" in err.value.issues[0].message
    active = plan_up(spec, replace(support.observed(spec), reservation=_block(
        state=ReservationState.ACTIVE, start=T0 - 60)))
    reserved.refuse(active, wait=False)  # started: --no-wait has nothing to refuse
    assert reserved.wait_for_start(rt, spec, active) is False and fake.slept == []
