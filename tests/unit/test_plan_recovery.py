"""plan/recovery.py: which nodes a job lost (from the master's final state and which
instances still run) and a recovery's record, its timings and what it cost."""

from __future__ import annotations

import pytest

from clusterkit.cluster.jobs.recovery import ending
from clusterkit.kinds import InstanceState
from clusterkit.node.jobfile import RecoveryRecord
from clusterkit.plan.evidence import Check, Ec2Seen, Verdict
from clusterkit.plan.recovery import (
    Loss,
    LossReason,
    Recovery,
    find_loss,
    job_record,
    recoveries_of,
    weigh,
)
from clusterkit.training.jobfiles import state_of

T0 = 1_700_000_000.0
RUNNING = {0: True, 1: True, 2: True}


def state(name: str, **fields) -> object:
    """How a job ended, from a state.json as the master writes it."""
    return ending(state_of({"job_id": "j-20250101-120000-ab12", "state": name,
                            "updated": T0 + 50, **fields}))


def silent(node: int, when: float) -> dict:
    return {"node": node, "process": None, "exit": None, "signal": None, "time": when}


def test_a_notice_loses_the_node_it_came_to():
    notice = {"kind": "interruption", "node": 2, "at": T0 + 120, "action": "terminate",
              "seen": T0 + 1}
    loss = find_loss(state("interrupted", interruption=notice), RUNNING, now=T0 + 99)
    assert loss == Loss({2: LossReason.NOTICE}, since=T0 + 1, stopped=T0 + 50)


def test_a_node_that_found_its_gpus_unfit_is_lost_as_unhealthy_though_it_runs():
    notice = {"kind": "unfit", "node": 1, "at": T0 + 3, "action": "replace",
              "reason": "Xid 79 ... (Xid 79 = GPU has fallen off the bus)", "seen": T0 + 4}
    loss = find_loss(state("interrupted", interruption=notice), RUNNING, now=T0 + 99)
    assert loss == Loss({1: LossReason.UNHEALTHY}, since=T0 + 4, stopped=T0 + 50)


def test_a_silent_node_is_unreachable_while_its_instance_runs_and_gone_once_not():
    failed = state("failed", failed=silent(1, T0 + 5))
    assert find_loss(failed, RUNNING, now=T0 + 99) == Loss(
        {1: LossReason.UNREACHABLE}, T0 + 5, T0 + 50)
    assert find_loss(failed, {**RUNNING, 1: False}, now=T0 + 99).nodes == {
        1: LossReason.GONE}


def test_a_master_still_stopping_after_a_silent_node_has_lost_it():
    stopping = state("stopping", failed=silent(2, T0 + 5))
    assert find_loss(stopping, RUNNING, now=T0 + 99).nodes == {2: LossReason.UNREACHABLE}
    assert find_loss(state("stopping"), RUNNING, now=T0 + 99) is None  # a stop request


def test_an_instance_that_stopped_running_is_lost_whatever_failed_first():
    """A worker on a surviving node may crash before the master notices the silence: the
    gone instance is still the loss."""
    exit_first = state("failed", failed={"node": 0, "process": "worker-0", "exit": 1,
                                         "time": T0 + 3})
    loss = find_loss(exit_first, {**RUNNING, 2: False}, now=T0 + 99)
    assert loss is not None and loss.nodes == {2: LossReason.GONE}
    assert loss.since == T0 + 50  # no failure of the lost node: when the job stopped


@pytest.mark.parametrize("name", ["succeeded", "stopped", "running"])
def test_a_job_that_did_not_fail_lost_nothing(name: str):
    assert find_loss(state(name), RUNNING, now=T0) is None


def test_a_job_that_failed_on_its_own_lost_nothing():
    failed = state("failed", failed={"node": 1, "process": "worker-0", "exit": 3,
                                     "time": T0 + 3})
    assert find_loss(failed, RUNNING, now=T0) is None


def test_an_unreadable_master_is_lost_only_when_its_instance_is_gone():
    """The client not reaching a running master is no loss: the job may run on (the
    client's own network may be what failed); terminating the master would lose it."""
    assert find_loss(None, {**RUNNING, 0: False}, now=T0) == Loss({0: LossReason.GONE}, T0, T0)
    assert find_loss(None, RUNNING, now=T0) is None
    assert find_loss(None, {0: True, 1: False}, now=T0).nodes == {1: LossReason.GONE}


def recovery(**changes) -> Recovery:
    base = dict(number=1, lost={"worker-2": "notice"}, replaced={"worker-2": ("i-a", "i-b")},
                since=T0, stopped=T0 + 60, job="j-20250101-120000-ab12", node_count=3,
                last_checkpoint=T0 + 2, hourly_usd=3.0, running=T0 + 240)
    return Recovery(**{**base, **changes})


def test_node_hours_lost_are_the_work_since_the_checkpoint_and_the_downtime():
    r = recovery()
    assert r.seconds_to_running == 240
    # 3 nodes x (58 s of work after the checkpoint + 180 s down)
    assert r.node_hours_lost == pytest.approx(3 * (58 + 180) / 3600)
    assert r.cost_usd == pytest.approx(r.node_hours_lost * 1.0)
    assert "recovery 1 at " in r.describe() and "worker-2 (notice)" in r.describe()
    assert "running again 240 s later; 0.20 node-hours lost ($0.20)" in r.describe()


def test_without_a_checkpoint_the_work_since_the_loss_counts_and_no_price_no_cost():
    r = recovery(last_checkpoint=None, hourly_usd=None)
    assert r.node_hours_lost == pytest.approx(3 * (60 + 180) / 3600)
    assert r.cost_usd is None and "$" not in r.describe()


def test_a_recovery_not_running_yet_says_so():
    r = recovery(running=None)
    assert r.node_hours_lost is None and r.describe().endswith("not running again yet")


def test_the_record_round_trips_and_the_newest_is_completed_by_the_jobs_start():
    first = recovery()
    second = recovery(number=2, running=None, since=T0 + 1000, stopped=T0 + 1010)
    record = job_record("j-20250101-110000-ab12", [first, second], "python3 train.py")
    assert record.restart_count == 2 and record.first_job == "j-20250101-110000-ab12"
    assert record.command == "python3 train.py"
    back = recoveries_of(record, started=T0 + 1100)
    assert back[0] == first and back[1].running == T0 + 1100
    damaged = RecoveryRecord.from_json({"recoveries": [{"number": "x"}, first.to_json()]}, "t")
    assert recoveries_of(damaged, None) == [first]


def test_ec2_not_answering_loses_no_node_and_leaves_a_silent_one_unconfirmed():
    """A describe that failed is no evidence: no node is gone; a node the master heard
    nothing from waits for EC2's word (the caller asks again)."""
    failed = state("failed", failed=silent(1, T0 + 5))
    loss, decisions = weigh(failed, None, now=T0 + 99)
    assert loss is None
    assert [(d.index, d.verdict) for d in decisions] == [(1, Verdict.UNCONFIRMED)]
    assert find_loss(None, None, now=T0) is None


def test_only_ec2_states_that_say_so_lose_a_node():
    ec2 = {0: Ec2Seen(InstanceState.RUNNING, Check.OK),
           1: Ec2Seen(InstanceState.PENDING, Check.INITIALIZING),
           2: Ec2Seen(InstanceState.RUNNING, Check.IMPAIRED),
           3: Ec2Seen(InstanceState.STOPPING)}
    loss = find_loss(state("failed", failed=silent(3, T0 + 5)), ec2, now=T0 + 99)
    assert loss is not None
    assert loss.nodes == {2: LossReason.IMPAIRED, 3: LossReason.GONE}
    assert "status check impaired" in loss.evidence()[2]
    assert "EC2: stopping" in loss.evidence()[3]
    assert {d.index: d.verdict for d in loss.decisions} == {
        0: Verdict.KEPT, 1: Verdict.KEPT, 2: Verdict.LOST, 3: Verdict.LOST}


def test_a_capacity_block_end_is_a_notice_with_its_evidence():
    notice = {"kind": "interruption", "node": 1, "at": T0 + 120, "action": "block-end",
              "seen": T0 + 1}
    loss = find_loss(state("interrupted", interruption=notice), RUNNING, now=T0 + 99)
    assert loss is not None and loss.nodes == {1: LossReason.NOTICE}
    assert loss.evidence() == {1: "block-end notice in its metadata (action block-end)"}


def test_a_silence_is_weighed_against_the_jobs_node_timeout():
    failed = state("failed", failed=silent(2, T0 + 5))
    loss = find_loss(failed, RUNNING, now=T0 + 99, node_timeout=7)
    assert loss is not None
    assert loss.evidence()[2] == "silent 7 s to the master (node_timeout 7 s); EC2: running"


def test_a_recoverys_evidence_is_kept_in_its_record_and_printed():
    r = recovery(evidence={"worker-2": "interruption notice in its metadata (action stop)"})
    assert Recovery.from_json(r.to_json()) == r
    assert "worker-2 (notice: interruption notice in its metadata (action stop))" in r.describe()
    assert "evidence" not in recovery().to_json()  # older records read the same
