"""The limit of a command: the critical path of what AWS made it wait for, and
clusterkit's overhead above it. PURE (records in, numbers out).

The input is the timed sandbox's own record (``run/timeline.jsonl``): one record per API
call ``{kind: "call", what: operation, start, end}`` (its round trip) and one per AWS
wait ``{kind: "wait", what: "instance pending -> running", resource, start, end}``;
wall-clock seconds.

Definitions, for a command's window ``[start, end]`` (e.g. from `up` to the first step
logged by every worker):

- every record is clipped to the window (the part outside is another command's); a
  record wholly outside it, or of no length, is dropped;
- a **chain** is a set of clipped intervals of which no two overlap: each begins when or
  after the one before it ended (intervals that touch, within ``TOUCH``, are in series).
  Intervals that overlap ran in parallel, so at most one of them is on any chain;
- the **limit** is the greatest total length of a chain: the longest run of AWS's own
  time (round trips and waits) that the calls this command really made put one after
  another. Its intervals are the **critical path** (``Limit.chain``);
- the **overhead** is the window's length minus the limit: the time spent on anything
  else (clusterkit's own work, SSH, the nodes' scripts, the job starting, poll
  intervals, a call or wait begun later than it could have been); in per cent *of the
  limit*, so "overhead at most 15%" means the command took at most 1.15x its limit.

Why not the union of the intervals: two overlapping waits of which one began late are
both counted by the union, while the chain counts one of them and the lateness as
overhead. What the chain cannot know is which calls depended on each other: calls made
one after another count in series, as made, so a run that serialises calls it could
have overlapped has them in its limit; ``Limit.parts`` shows what the path is made of.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

TOUCH = 0.001  # seconds: records are rounded to 0.1 ms, and two threads' clocks differ


class Kind(str, Enum):
    CALL = "call"  # an API call's round trip
    WAIT = "wait"  # a wait AWS imposes (a state change, a resource becoming available)


@dataclass(frozen=True)
class Interval:
    kind: Kind
    what: str  # the operation of a call; the wait's name
    resource: str  # the instance, volume, ... a wait is about ("" for a call)
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def intervals(records: Iterable[Mapping[str, Any]]) -> list[Interval]:
    """Timeline records as intervals; a kind this module does not know (a mark, a note)
    is not AWS's time and is left out."""
    known = {k.value: k for k in Kind}
    return [Interval(known[r["kind"]], str(r.get("what", "")), str(r.get("resource", "")),
                     float(r["start"]), float(r["end"]))
            for r in records if r.get("kind") in known]


@dataclass(frozen=True)
class Part:
    """What part of the critical path one kind of interval makes: calls by operation,
    waits by name."""

    kind: Kind
    what: str
    count: int
    seconds: float


@dataclass(frozen=True)
class Limit:
    start: float
    end: float
    chain: tuple[Interval, ...]  # the critical path, in time order

    @property
    def wall(self) -> float:
        return self.end - self.start

    @property
    def limit(self) -> float:
        return sum(i.seconds for i in self.chain)

    @property
    def overhead(self) -> float:
        return self.wall - self.limit

    @property
    def overhead_pct(self) -> float | None:
        """Overhead in per cent of the limit (None when the limit is 0)."""
        return 100.0 * self.overhead / self.limit if self.limit > 0 else None

    def parts(self) -> list[Part]:
        """The critical path by kind and what, the longest first."""
        grouped: dict[tuple[Kind, str], list[Interval]] = {}
        for i in self.chain:
            grouped.setdefault((i.kind, i.what), []).append(i)
        parts = [Part(kind, what, len(items), sum(i.seconds for i in items))
                 for (kind, what), items in grouped.items()]
        return sorted(parts, key=lambda p: (-p.seconds, p.kind.value, p.what))


def clip(items: Iterable[Interval], start: float, end: float) -> list[Interval]:
    """The parts of ``items`` inside [start, end] (none of no length)."""
    out = []
    for i in items:
        lo, hi = max(i.start, start), min(i.end, end)
        if hi > lo:
            out.append(Interval(i.kind, i.what, i.resource, lo, hi))
    return out


def critical_path(items: Iterable[Interval], start: float, end: float) -> Limit:
    """The limit of the window [start, end] (see the module docstring): the chain of
    greatest total length (weighted interval scheduling, O(n log n))."""
    if end < start:
        raise ValueError(f"the window ends ({end}) before it starts ({start})")
    order = sorted(clip(items, start, end), key=lambda i: (i.end, i.start, i.what))
    ends = [i.end for i in order]
    best = [0.0] * (len(order) + 1)  # best[k]: the longest chain of the first k
    took = [False] * len(order)
    before = [0] * len(order)  # how many end before item k starts (they may precede it)
    for k, item in enumerate(order):
        before[k] = bisect_right(ends, item.start + TOUCH, 0, k)
        with_it = item.seconds + best[before[k]]
        took[k] = with_it > best[k]
        best[k + 1] = with_it if took[k] else best[k]
    chain: list[Interval] = []
    k = len(order)
    while k > 0:
        if took[k - 1]:
            chain.append(order[k - 1])
            k = before[k - 1]
        else:
            k -= 1
    return Limit(start, end, tuple(reversed(chain)))


def by_window(items: Iterable[Interval], windows: Mapping[str, tuple[float, float]]
              ) -> dict[str, Limit]:
    """The limit of each named window (a stage of a command), in the windows' order."""
    pool = list(items)
    return {name: critical_path(pool, lo, hi) for name, (lo, hi) in windows.items()}
