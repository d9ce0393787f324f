"""A job's spending cap while it runs (``train.max_cost`` / ``train --max-cost``): the
pure ledger and decision (``training/budget.py``) fed with the instances the job uses,
and acted on.

- ``Spending`` is the job's ledger, kept across its attempts by the `train` that started
  it (``new``), or read back by `train --attach` and the recovery controller from the
  master's ``budget.json`` (``resume``), which every attempt's start writes
  (``files``). It sees the attempt's nodes and the ready standbys (``observe``); an
  instance whose price is unknown counts at its type's on-demand price, and one with
  neither is refused before the job starts (``UnknownPrice``: a cap it cannot count).
- ``BudgetWatch`` runs beside the follow of an attempt (``attempt.follow_job``): every
  ``TICK_S`` it observes, says the spend at each quarter of the cap
  (``[budget] spent $… of the $… cap …``), and acts on the decision: CHECKPOINT asks
  the master's supervisor (``supervisor.py budget``) to give every process the
  checkpoint signal and the job's checkpoint grace, then stop the job as ``budget``;
  STOP (the cap reached while it still runs) asks it again with no grace.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from clusterkit.catalog.prices import on_demand_price
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster, job_dir
from clusterkit.errors import ClusterkitError, GroupError
from clusterkit.node.jobfile import Stopping
from clusterkit.plan.cost import usd
from clusterkit.plan.nodes import Node
from clusterkit.remote.channels import Call
from clusterkit.spec.model import Spec, Train
from clusterkit.training.budget import (
    RECORD_NAME,
    Budget,
    Decision,
    Ledger,
    Record,
    Seen,
    Status,
)

TICK_S = 2.0  # seconds between two looks at the spend (part of the margin)
QUARTERS = (0.25, 0.5, 0.75)  # shares of the cap said as they are passed


class UnknownPrice(ClusterkitError):
    """An instance of the job has no launch price and no on-demand price."""


def cap_of(spec: Spec, option: float | None) -> float | None:
    """``--max-cost``, else ``train.max_cost``; None: no cap."""
    if option is not None:
        return option
    return spec.train.max_cost if spec.train is not None else None


def price_of(node: Node) -> float:
    """The $/h the node was launched at; its type's on-demand price when that is
    unknown (see ``training/budget.py``); UnknownPrice when neither is known."""
    if node.price is not None:
        return node.price
    bound = on_demand_price(node.instance_type, node.region)
    if bound is None:
        raise UnknownPrice(
            f"the spending cap cannot be counted: instance {node.instance_id} "
            f"({node.instance_type} in {node.region}) has no recorded launch price and no "
            "known on-demand price",
            "run without train.max_cost / --max-cost, or on a type clusterkit's price "
            "snapshot knows (`clusterkit spot --instance-types TYPE`)")
    return bound


def launched_at(node: Node) -> float:
    """The node's launch time (epoch; 0 when unknown: counted from the job's start)."""
    try:
        return datetime.fromisoformat(node.launch_time.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class Spending:
    """The job's ledger against its cap, and the standbys whose spend it counts."""

    def __init__(self, ledger: Ledger, clock: Callable[[], float] = time.time) -> None:
        self.ledger, self.clock = ledger, clock
        self.standbys: Callable[[], Sequence[Node]] = list
        self.lock = threading.Lock()

    @classmethod
    def new(cls, spec: Spec, cap: float | None, nodes: Sequence[Node],
            clock: Callable[[], float] = time.time) -> Spending | None:
        """The ledger of a job about to start (None: no cap); its nodes' prices checked
        first (UnknownPrice)."""
        if cap is None:
            return None
        for node in nodes:
            price_of(node)
        train = spec.train or Train()
        # the supervisor's TERM -> KILL grace: job.json's default (attempt.start)
        budget = Budget.of(cap, train.checkpoint_grace, Stopping().grace_seconds, TICK_S)
        return cls(Ledger(budget, clock()), clock)

    @classmethod
    def resume(cls, jc: JobCluster, job_id: str,
               clock: Callable[[], float] = time.time) -> Spending | None:
        """The ledger the job's ``budget.json`` on the master records (None: no cap, or
        none that reads)."""
        try:
            path = shlex.quote(f"{job_dir(job_id)}/{RECORD_NAME}")
            got = jc.run([jc.master], {jc.master.hop.label: Call(
                f"cat {path} 2>/dev/null || true")}, timeout=30)
            text = got[jc.master.hop.label].stdout.strip()
            record = Record.from_json(json.loads(text)) if text else None
        except (ClusterkitError, GroupError, ValueError):
            return None
        return cls(record.ledger(), clock) if record is not None else None

    def observe(self, jc: JobCluster, at: float | None = None) -> Status:
        """The attempt's nodes and the ready standbys seen now (``at``: then); the
        status."""
        seen = [Seen(n.instance_id, jc.node_name(n.index or 0), price_of(n), launched_at(n))
                for n in jc.nodes]
        seen += [Seen(n.instance_id, f"standby {n.instance_id}", price_of(n), launched_at(n))
                 for n in self.standbys()]
        with self.lock:
            now = self.clock() if at is None else at
            self.ledger.observe(seen, now)
            return self.ledger.status(now)

    def status(self) -> Status:
        with self.lock:
            return self.ledger.status(self.clock())

    def files(self) -> dict[str, str]:
        """``budget.json`` for the attempt's job directory."""
        with self.lock:
            record = self.ledger.record(self.clock())
        return {RECORD_NAME: json.dumps(record.to_json())}


def reason_of(status: Status) -> str:
    return (f"spending cap: spent {usd(status.spent)} of the {usd(status.cap)} cap "
            f"(train.max_cost), {usd(status.rate)}/h")


def budget_call(job_id: str, reason: str, checkpoint_for: float) -> Call:
    """The master's ``supervisor.py budget``: stop the job as ``budget`` (see above)."""
    d = job_dir(job_id)
    words = [jobs.node_python(), f"{d}/supervisor.py", "budget", d, "--reason", reason,
             "--checkpoint", f"{checkpoint_for:g}"]
    return Call(f"if [ -f {shlex.quote(d)}/supervisor.py ]; then {shlex.join(words)}; fi")


@dataclasses.dataclass
class BudgetWatch:
    """One attempt's watch of the spend (see the module's docstring)."""

    spending: Spending
    jc: JobCluster
    job_id: str
    say: Callable[[str], None]
    checkpoint_grace: float
    acted: Decision = Decision.UNDER
    said: float = 0.0  # the highest quarter of the cap said so far
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> BudgetWatch:
        status = self.spending.observe(self.jc)
        self.say(f"[budget] {status.line()}")
        self.thread = threading.Thread(target=self._loop, daemon=True, name="budget")
        self.thread.start()
        return self

    def close(self) -> dict[str, Any]:
        """The watch stopped; the spend against the cap as the job ends."""
        self.done.set()
        if self.thread is not None:
            self.thread.join(30)
        status = self.spending.observe(self.jc)
        self.say(f"[budget] job {self.job_id} ended: {status.line()}")
        return {**status.to_json(), "acted": self.acted.value}

    def _loop(self) -> None:
        while not self.done.wait(TICK_S):
            try:
                self.tick()
            except (ClusterkitError, GroupError, OSError) as exc:
                self.say(f"[budget] could not act on the spend: {str(exc).splitlines()[0]}")

    def tick(self) -> None:
        status = self.spending.observe(self.jc)
        passed = max((q for q in QUARTERS if status.share >= q), default=0.0)
        if passed > self.said and status.decision is Decision.UNDER:
            self.said = passed
            self.say(f"[budget] {status.line()}")
        if status.decision is Decision.UNDER or self.acted is Decision.STOP or \
                status.decision is self.acted:
            return
        grace = self.checkpoint_grace if status.decision is Decision.CHECKPOINT else 0.0
        self.acted = status.decision
        self.say(f"[budget] {status.line()}: " + (
            f"the checkpoint signal to every process, the job stops as budget in "
            f"{grace:g} s" if grace else "the cap is reached: stopping the job now"))
        fresh = dataclasses.replace(self.jc, pool=None)  # the follow's own stay its own
        fresh.run([fresh.master], {fresh.master.hop.label: budget_call(
            self.job_id, reason_of(status), grace)}, timeout=60)


def watch_for(spending: Spending | None, jc: JobCluster, job_id: str,
              say: Callable[[str], None]) -> BudgetWatch | None:
    """A started watch of ``job_id`` on ``jc`` (None: no cap)."""
    if spending is None:
        return None
    train = (jc.spec.train if jc.spec is not None else None) or Train()
    return BudgetWatch(spending, jc, job_id, say, train.checkpoint_grace).start()
