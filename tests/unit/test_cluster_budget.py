"""The spending cap's client half (``clusterkit/cluster/jobs/budget.py``): prices (the
launch price, else on-demand, else refused), the watch's one call to the master's
supervisor at the margin and once more at the cap, and the record read back. The SSH
calls go to a recording stand-in (the sandbox test, tests/e2e/test_train_budget.py,
runs them for real)."""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest

from clusterkit.cluster.jobs import budget
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Hop, Login, Target
from clusterkit.remote.results import GroupResult, NodeResult
from clusterkit.spec.model import Train
from clusterkit.training.budget import Budget, Decision, Ledger

JOB = "j-20261128-120000-abcd"


def node(index: int, *, price: float | None = 3.6, itype: str = "c5.large") -> Node:
    return Node(f"i-{index}", index, "running", itype, "us-east-1a", Market.ON_DEMAND,
                "us-east-1", launch_time="2026-11-28T12:00:00+00:00", price=price)


@dataclasses.dataclass(frozen=True)
class Recording(JobCluster):
    """Every call's command kept; each answers ``answer``."""

    calls: list = dataclasses.field(default_factory=list)
    answer: str = ""

    def run(self, targets, calls, **options):  # type: ignore[override]
        self.calls.extend(c.command for c in calls.values())
        return GroupResult(NodeResult(t.node, t.hop.label, t.hop.address, exit_code=0,
                                      stdout=self.answer, stderr="")
                           for t in targets if t.hop.label in calls)


def recording(nodes: list[Node], answer: str = "") -> Recording:
    targets = [Target(n, Hop(f"c1-{n.index}", f"10.0.0.{n.index}")) for n in nodes]
    return Recording("c1", None, Login("c1"), nodes, targets, answer=answer)


def test_a_price_is_the_launch_price_else_on_demand_else_refused() -> None:
    assert budget.price_of(node(0, price=1.5)) == 1.5
    assert budget.price_of(node(0, price=None)) == 0.085  # c5.large on-demand, us-east-1
    with pytest.raises(budget.UnknownPrice, match="i-0 .*no known on-demand price"):
        budget.price_of(node(0, price=None, itype="zz9.huge"))


def test_no_cap_no_spending_and_an_uncountable_cap_is_refused_at_start() -> None:
    class Bare:  # a spec: only its train section is read
        train = Train(checkpoint_grace=4)

    assert budget.Spending.new(Bare(), None, [node(0)]) is None  # type: ignore[arg-type]
    with pytest.raises(budget.UnknownPrice):
        budget.Spending.new(Bare(), 1.0, [node(0, price=None, itype="zz9.huge")])  # type: ignore[arg-type]
    made = budget.Spending.new(Bare(), 1.0, [node(0)], clock=lambda: 5.0)  # type: ignore[arg-type]
    assert made is not None and made.ledger.budget == Budget(1.0, 4 + 10 + budget.TICK_S)


def watched(now: list[float]) -> tuple[budget.BudgetWatch, Recording, list[str]]:
    """Two nodes at $3.60/h each ($0.002/s), a $1.00 cap, a 100 s margin ($0.20)."""
    jc = recording([node(0), node(1)])
    launched = budget.launched_at(jc.nodes[0])
    spending = budget.Spending(Ledger(Budget(1.0, 100.0), since=launched),
                               clock=lambda: launched + now[0])
    said: list[str] = []
    return budget.BudgetWatch(spending, jc, JOB, said.append, 4.0), jc, said


# (seconds since the start, what the watch did after it: its decision, calls so far)
STEPS = [(100.0, Decision.UNDER, 0), (300.0, Decision.UNDER, 0),
         (400.0, Decision.CHECKPOINT, 1), (450.0, Decision.CHECKPOINT, 1),
         (500.0, Decision.STOP, 2), (600.0, Decision.STOP, 2)]


def test_the_watch_asks_once_at_the_margin_and_once_more_at_the_cap() -> None:
    now = [0.0]
    watch, jc, said = watched(now)
    for at, acted, calls in STEPS:
        now[0] = at
        watch.tick()
        assert (watch.acted, len(jc.calls)) == (acted, calls), at
    checkpoint, stop = (shlex.split(c.split("then ", 1)[1].rsplit(";", 1)[0])
                        for c in jc.calls)
    assert checkpoint[1].endswith(f"{JOB}/supervisor.py") and checkpoint[2] == "budget"
    assert checkpoint[checkpoint.index("--checkpoint") + 1] == "4"
    assert stop[stop.index("--checkpoint") + 1] == "0"
    assert checkpoint[checkpoint.index("--reason") + 1] == (
        "spending cap: spent $0.8000 of the $1.00 cap (train.max_cost), $7.20/h")
    assert [line for line in said if "the checkpoint signal" in line] == [
        "[budget] spent $0.8000 of the $1.00 cap (80%), $7.20/h now; checkpoint at "
        "$0.8000: the checkpoint signal to every process, the job stops as budget in 4 s"]
    assert any(line.endswith("the cap is reached: stopping the job now") for line in said)
    assert [line.split(" (")[1].split(")")[0] for line in said
            if "checkpoint signal" not in line and "reached" not in line] == ["60%"]


def test_the_record_written_at_a_start_is_read_back_by_a_later_client() -> None:
    now = [0.0]
    watch, jc, _ = watched(now)
    now[0] = 200.0
    watch.spending.observe(jc)
    [(name, text)] = watch.spending.files().items()
    assert name == "budget.json"
    later = budget.Spending.resume(recording(jc.nodes, answer=text), JOB,
                                   clock=watch.spending.clock)
    assert later is not None
    assert later.observe(jc).spent == pytest.approx(0.4)
    assert budget.Spending.resume(recording(jc.nodes, answer=""), JOB) is None
    assert budget.Spending.resume(recording(jc.nodes, answer=json.dumps({"v": 9})), JOB) is None
