"""A job's spending cap (``train.max_cost`` / ``train --max-cost``). PURE: the caller
passes the clock and what it saw of the instances.

- **Spend** is every instance the job used (its nodes, their replacements, standbys),
  each over its own interval: from when it began billing for the job (its launch, or
  the job's first start when it was launched before) to when it was last seen gone (or
  ``now``), at the $/h it was launched at, billed per second (``Interval``). A ``Ledger``
  keeps the intervals: ``observe`` opens one for each instance seen the first time and
  closes those no longer seen.
- **The margin** is what the job spends while it stops: the checkpoint grace (the time
  the processes get to save after the checkpoint signal), the grace between SIGTERM and
  SIGKILL, and one tick of the watch that decides, at the rate of the instances running
  now (``Budget.margin``).
- **The decision** (``decide``): UNDER while spend + margin stays below the cap;
  CHECKPOINT once it does not (the job gets the checkpoint signal and stops as
  ``budget`` when the grace is over or every process saved); STOP once spend reached the
  cap itself (the stop did not finish in time: stopped at once, no new grace).
- **Unknown prices**: an instance whose launch price is unknown counts at its type's
  on-demand price (an upper bound of spot unless ``nodes.max_price`` says more; then
  that); when neither is known the cap is refused before the job starts (the caller's
  ``UnknownPrice``), since a cap that cannot be counted is no cap.

``Record`` is what the job's directory keeps on the master (``budget.json``): the cap,
the margin's seconds, when the job first started and what instances that are gone
spent before this attempt, so `train --attach` and the recovery controller keep to the
same cap with the same decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from clusterkit.plan.cost import usd

SECONDS_PER_HOUR = 3600.0
RECORD_NAME = "budget.json"  # in the job's directory on the master
RECORD_VERSION = 1


class Decision(StrEnum):
    UNDER = "under"  # go on
    CHECKPOINT = "checkpoint"  # the checkpoint signal now, then stop as budget
    STOP = "stop"  # the cap is reached: stop now


@dataclass(frozen=True)
class Seen:
    """One instance as the caller sees it now: what it is, what it costs, since when."""

    instance_id: str
    name: str  # master, worker-1, standby for worker-1
    price: float  # USD/h it was launched at (or the bound the caller chose)
    launched: float  # epoch seconds


@dataclass(frozen=True)
class Interval:
    """What one instance cost the job: ``price`` $/h from ``start`` to ``end`` (None:
    still running)."""

    instance_id: str
    name: str
    price: float
    start: float
    end: float | None = None

    def seconds(self, now: float) -> float:
        return max(0.0, (self.end if self.end is not None else now) - self.start)

    def cost(self, now: float) -> float:
        return self.price * self.seconds(now) / SECONDS_PER_HOUR


def spend(intervals: Iterable[Interval], now: float) -> float:
    """Dollars the intervals cost up to ``now``."""
    return sum(i.cost(now) for i in intervals)


def hourly(intervals: Iterable[Interval]) -> float:
    """$/h of the instances still running."""
    return sum(i.price for i in intervals if i.end is None)


def decide(spent: float, margin: float, cap: float) -> Decision:
    """UNDER, CHECKPOINT or STOP (see the module's docstring)."""
    if spent >= cap:
        return Decision.STOP
    if spent + margin >= cap:
        return Decision.CHECKPOINT
    return Decision.UNDER


@dataclass(frozen=True)
class Budget:
    """The cap, and the seconds of spend kept as the margin before it."""

    cap: float  # USD
    margin_s: float

    @classmethod
    def of(cls, cap: float, checkpoint_grace: float, stop_grace: float,
           tick: float) -> Budget:
        return cls(cap, checkpoint_grace + stop_grace + tick)

    def margin(self, rate: float) -> float:
        """Dollars the instances running at ``rate`` $/h spend within the margin."""
        return rate * self.margin_s / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Status:
    """Spend against the cap at one moment, and the decision it makes."""

    cap: float
    spent: float
    rate: float  # $/h now
    margin: float  # USD
    decision: Decision

    @property
    def checkpoint_at(self) -> float:
        """The spend at which the checkpoint signal goes out (at today's rate)."""
        return max(0.0, self.cap - self.margin)

    @property
    def share(self) -> float:
        return self.spent / self.cap if self.cap else 1.0

    def line(self) -> str:
        """``spent $0.0123 of the $0.0500 cap (25%), $9.18/h now; checkpoint at $0.0117``."""
        return (f"spent {usd(self.spent)} of the {usd(self.cap)} cap ({self.share:.0%}), "
                f"{usd(self.rate)}/h now; checkpoint at {usd(self.checkpoint_at)}")

    def to_json(self) -> dict[str, Any]:
        return {"cap": self.cap, "spent": round(self.spent, 6), "rate": round(self.rate, 6),
                "margin": round(self.margin, 6), "checkpoint_at": round(self.checkpoint_at, 6),
                "decision": self.decision.value}


@dataclass
class Ledger:
    """The job's intervals, kept across its attempts (``observe``) and read as a
    ``Status`` against ``budget``. ``since``: the job's first start (epoch); instances
    launched before it count from it. ``spent_before``: what instances this ledger never
    saw spent (the record of an earlier client's attempts)."""

    budget: Budget
    since: float
    spent_before: float = 0.0
    intervals: dict[str, Interval] = field(default_factory=dict)

    def observe(self, seen: Sequence[Seen], now: float) -> None:
        """Instances seen now: new ones opened (from their launch, or ``since``), those
        no longer seen closed at ``now``, one seen again after it was closed reopened."""
        ids = {s.instance_id for s in seen}
        for key, interval in list(self.intervals.items()):
            if interval.end is None and key not in ids:
                self.intervals[key] = replace(interval, end=now)
        for s in seen:
            known = self.intervals.get(s.instance_id)
            if known is None:
                self.intervals[s.instance_id] = Interval(
                    s.instance_id, s.name, s.price, max(s.launched, self.since))
            elif known.end is not None:  # closed too early: it ran on
                self.intervals[s.instance_id] = replace(known, end=None)

    def status(self, now: float) -> Status:
        spent = self.spent_before + spend(self.intervals.values(), now)
        rate = hourly(self.intervals.values())
        margin = self.budget.margin(rate)
        return Status(self.budget.cap, spent, rate, margin,
                      decide(spent, margin, self.budget.cap))

    def spent_gone(self, now: float) -> float:
        """What the closed intervals (and those before) spent: a restart's record."""
        return self.spent_before + spend((i for i in self.intervals.values()
                                          if i.end is not None), now)

    def record(self, now: float) -> Record:
        return Record(self.budget.cap, self.budget.margin_s, self.since, self.spent_gone(now))


@dataclass(frozen=True)
class Record:
    """``budget.json`` in the job's directory: what a later client needs to keep the job
    to its cap (the instances running then are seen again; gone ones are in
    ``spent_before``)."""

    cap: float
    margin_s: float
    since: float
    spent_before: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, "kind": "budget", "cap": self.cap,
                "margin_s": self.margin_s, "since": self.since,
                "spent_before": round(self.spent_before, 6)}

    @classmethod
    def from_json(cls, data: object) -> Record | None:
        """The record, or None when it is not one this client reads."""
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            return None
        try:
            return cls(float(data["cap"]), float(data["margin_s"]), float(data["since"]),
                       float(data.get("spent_before") or 0.0))
        except (KeyError, TypeError, ValueError):
            return None

    def ledger(self) -> Ledger:
        return Ledger(Budget(self.cap, self.margin_s), self.since, self.spent_before)
