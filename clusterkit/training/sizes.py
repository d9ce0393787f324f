"""An elastic job's size over time (``train.elastic``): the master's record of each change
(``state.json``'s ``sizes``: epoch seconds, nodes) -> the spans it ran at each size and
the node-hours at each size, and the size now, for `train`, `status`, `top` and the
job's report. PURE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """The job at ``nodes`` nodes from ``start`` to ``end`` (epoch seconds)."""

    nodes: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def node_hours(self) -> float:
        return self.nodes * self.seconds / 3600


def spans(changes: Sequence[tuple[float, int]], end: float) -> list[Span]:
    """The spans between the changes, the last until ``end`` (the job's end, or now);
    changes out of order or after ``end`` are clipped, a repeated size merged, an empty
    span dropped."""
    ordered = sorted(changes)
    found: list[Span] = []
    for i, (start, nodes) in enumerate(ordered):
        until = min(ordered[i + 1][0] if i + 1 < len(ordered) else end, end)
        if until <= start:
            continue
        if found and found[-1].nodes == nodes and found[-1].end == start:
            found[-1] = Span(nodes, found[-1].start, until)
        else:
            found.append(Span(nodes, start, until))
    return found


def node_hours_by_size(changes: Sequence[tuple[float, int]], end: float) -> dict[int, float]:
    """Nodes -> the node-hours the job ran at that size, largest size first."""
    hours: dict[int, float] = {}
    for span in spans(changes, end):
        hours[span.nodes] = hours.get(span.nodes, 0.0) + span.node_hours
    return dict(sorted(hours.items(), reverse=True))


def describe(changes: Sequence[tuple[float, int]], end: float, full: int) -> str:
    """One line: the sizes in turn with their lengths, then the node-hours at each size
    (``full``: the cluster's nodes); "" for a job that never changed size."""
    found = spans(changes, end)
    if len(found) < 2:
        return ""
    turns = " -> ".join(f"{s.nodes} ({_length(s.seconds)})" for s in found)
    hours = ", ".join(f"{h:.4f} at {n}" for n, h in node_hours_by_size(changes, end).items())
    return f"nodes over time (of {full}): {turns}; node-hours {hours}"


def now(changes: Sequence[tuple[float, int]], full: int) -> str:
    """The size the job runs at now (its newest change): "size: 2 of 3 nodes"; "" with no
    record (not an elastic job)."""
    if not changes:
        return ""
    return f"size: {max(changes)[1]} of {full} nodes"


def lines(changes: Sequence[tuple[float, int]], end: float, *, running: bool) -> list[str]:
    """What `train`, `status` and `top` print of an elastic job's size (``changes``: the
    master's record, its first the full size): while it runs, its size now; then its
    size over time until ``end`` (the job's end, or now), once it changed."""
    if not changes:
        return []
    full = min(changes)[1]
    over_time = describe(changes, end, full)
    return ([now(changes, full)] if running else []) + ([over_time] if over_time else [])


def _length(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
