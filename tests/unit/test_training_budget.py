"""The spending cap's pure half (``clusterkit/training/budget.py``): spend from
intervals, the margin, the decision, the ledger across attempts and its record. Cases as
data: each names its intervals (or observations), the clock and what must come out."""

from __future__ import annotations

import pytest

from clusterkit.plan.cost import duration, hours_bought, worst_hourly
from clusterkit.plan.spend import cap_line
from clusterkit.training.budget import (
    Budget,
    Decision,
    Interval,
    Ledger,
    Record,
    Seen,
    decide,
    hourly,
    spend,
)

H = 3600.0
# (name, intervals as (id, $/h, start, end), now, spend, $/h running now)
SPEND_CASES = [
    ("nothing yet", [], 100.0, 0.0, 0.0),
    ("one node one hour", [("i-1", 3.0, 0.0, None)], H, 3.0, 3.0),
    ("two nodes, one gone after half an hour",
     [("i-1", 2.0, 0.0, None), ("i-2", 2.0, 0.0, H / 2)], H, 3.0, 2.0),
    ("a replacement from its start only",
     [("i-1", 4.0, 0.0, H / 4), ("i-3", 4.0, H / 2, None)], H, 3.0, 4.0),
    ("a standby at its own (spot) price", [("i-1", 1.0, 0.0, None), ("i-s", 0.5, H / 2, H)],
     H, 1.25, 1.0),
    ("a clock behind the start counts nothing", [("i-1", 9.0, 200.0, None)], 100.0, 0.0, 9.0),
]


@pytest.mark.parametrize("name,rows,now,spent,rate", SPEND_CASES,
                         ids=[c[0] for c in SPEND_CASES])
def test_spend_and_rate(name, rows, now, spent, rate) -> None:
    intervals = [Interval(i, i, price, start, end) for i, price, start, end in rows]
    assert spend(intervals, now) == pytest.approx(spent)
    assert hourly(intervals) == pytest.approx(rate)


# (name, spent, margin, cap, decision)
DECIDE_CASES = [
    ("well under", 1.0, 0.5, 10.0, Decision.UNDER),
    ("the margin reaches the cap", 9.5, 0.5, 10.0, Decision.CHECKPOINT),
    ("inside the margin", 9.9, 0.5, 10.0, Decision.CHECKPOINT),
    ("the cap itself", 10.0, 0.5, 10.0, Decision.STOP),
    ("past the cap", 12.0, 0.0, 10.0, Decision.STOP),
    ("no margin: under until the cap", 9.99, 0.0, 10.0, Decision.UNDER),
    ("a margin wider than the cap: checkpoint at once", 0.0, 20.0, 10.0, Decision.CHECKPOINT),
]


@pytest.mark.parametrize("name,spent,margin,cap,decision", DECIDE_CASES,
                         ids=[c[0] for c in DECIDE_CASES])
def test_decide(name, spent, margin, cap, decision) -> None:
    assert decide(spent, margin, cap) is decision


def test_margin_is_the_checkpoint_grace_and_stop_at_the_running_rate() -> None:
    budget = Budget.of(5.0, checkpoint_grace=90, stop_grace=10, tick=2)
    assert budget.margin_s == 102
    assert budget.margin(36.0) == pytest.approx(36.0 * 102 / H)  # $1.02


# Observations of a ledger: (now, instances seen as (id, $/h, launched)), then
# (now, spent, rate, decision) checked after the last.
LEDGER_CASES = [
    ("launched before the job: counted from the job's start",
     [(1000.0, [("i-1", 3.6, 0.0)])], (1000.0 + H, 3.6, 3.6, Decision.UNDER)),
    ("a lost node closes when no longer seen, its replacement opens at its launch",
     [(0.0, [("i-1", 3.6, 0.0), ("i-2", 3.6, 0.0)]),
      (H / 2, [("i-1", 3.6, 0.0), ("i-3", 3.6, H / 4)])],
     (H, 3.6 + 1.8 + 2.7, 7.2, Decision.CHECKPOINT)),
    ("an instance seen again after a miss runs on",
     [(0.0, [("i-1", 3.6, 0.0)]), (100.0, []), (200.0, [("i-1", 3.6, 0.0)])],
     (H, 3.6, 3.6, Decision.UNDER)),
]


@pytest.mark.parametrize("name,looks,end", LEDGER_CASES, ids=[c[0] for c in LEDGER_CASES])
def test_ledger(name, looks, end) -> None:
    ledger = Ledger(Budget(cap=10.0, margin_s=1200.0), since=looks[0][0])
    for now, seen in looks:
        ledger.observe([Seen(i, i, p, at) for i, p, at in seen], now)
    now, spent, rate, decision = end
    status = ledger.status(now)
    assert (round(status.spent, 6), status.rate, status.decision) == \
        (pytest.approx(spent), pytest.approx(rate), decision)


def test_record_carries_what_gone_instances_spent_to_a_later_client() -> None:
    ledger = Ledger(Budget(cap=1.0, margin_s=100.0), since=0.0)
    ledger.observe([Seen("i-1", "master", 3.6, 0.0), Seen("i-2", "worker-1", 3.6, 0.0)], 0.0)
    ledger.observe([Seen("i-1", "master", 3.6, 0.0)], 500.0)  # i-2 lost: $0.50
    record = Record.from_json(ledger.record(600.0).to_json())
    assert record == Record(1.0, 100.0, 0.0, pytest.approx(0.5))
    later = record.ledger()
    later.observe([Seen("i-1", "master", 3.6, 0.0)], 600.0)  # the running one seen again
    assert later.status(600.0).spent == pytest.approx(0.5 + 0.6)
    assert later.status(600.0).decision is Decision.STOP


@pytest.mark.parametrize("data", [None, {}, {"version": 2, "cap": 1}, {"version": 1},
                                  {"version": 1, "cap": "x", "margin_s": 1, "since": 0}])
def test_record_from_anything_else_is_none(data) -> None:
    assert Record.from_json(data) is None


def test_status_line_names_spend_cap_rate_and_checkpoint() -> None:
    ledger = Ledger(Budget(cap=0.05, margin_s=17.0), since=0.0)
    ledger.observe([Seen("i-1", "master", 8.16, 0.0)], 0.0)
    status = ledger.status(10.0)
    assert status.line() == ("spent $0.0227 of the $0.0500 cap (45%), $8.16/h now; "
                             "checkpoint at $0.0115")
    assert status.decision is Decision.CHECKPOINT
    assert status.to_json()["decision"] == "checkpoint"


# (count, on-demand prices of the allowed types and regions, max_price, $/h at worst)
WORST_CASES = [
    (2, [4.08, 3.06], None, 8.16),
    (4, [None, 1.0], None, 4.0),
    (1, [1.0], 2.5, 2.5),  # a spot ceiling above on-demand
    (3, [None], None, None),
]


@pytest.mark.parametrize("count,prices,max_price,worst", WORST_CASES)
def test_worst_hourly(count, prices, max_price, worst) -> None:
    assert worst_hourly(count, prices, max_price) == worst


def test_cap_line_in_hours_at_the_worst_case() -> None:
    assert hours_bought(10.0, 4.0) == 2.5 and hours_bought(1.0, None) is None
    assert duration(2.5) == "2.5 h" and duration(0.25) == "15.0 min" \
        and duration(10 / 3600) == "10 s"
    assert cap_line(10.0, 4.0, "2 x c5") == (
        "train.max_cost $10.00 buys 2.5 h of the job at the worst case $4.0000/h (2 x c5)")
    assert "unknown" in cap_line(10.0, None, "2 x c5")
