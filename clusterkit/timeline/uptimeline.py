"""What an `up` waited for, as bars a chart draws (`clusterkit up --timeline FILE.png`,
`clusterkit status NAME --timeline FILE.png`): from the progress events `up` reported,
each with the time it was reported. PURE.

- One row per stage (key pair, stack, launch, SSH, bootstrap, ...): from the stage's
  first start to the start of the next stage, or to its own "done" if it came first.
- One row per node, named by its role (master, worker-N) where the record knows it,
  else by its instance id, in index order: its SSH wait (from the SSH stage's start to
  the moment the node answered) and its bootstrap (from the bootstrap stage's start to
  the node's result).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STAGE_STARTED, STAGE_DONE, PROGRESS = "stage-started", "stage-done", "progress"
PER_NODE = ("ssh", "bootstrap")  # stages whose progress events close one node's bar


@dataclass(frozen=True)
class Mark:
    """One reported event: when (seconds since the command started), its kind and
    stage (the values of events.Kind and events.Stage), and the node it is about."""

    at: float
    kind: str
    stage: str | None = None
    node: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"at": round(self.at, 3), "kind": self.kind, "stage": self.stage,
                "node": self.node}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Mark:
        return cls(float(data["at"]), str(data["kind"]), data.get("stage"), data.get("node"))


@dataclass(frozen=True)
class Bar:
    """One bar of the chart: its row, what it was, and when (seconds since the start)."""

    row: str
    label: str
    start: float
    end: float


def _stage_spans(marks: Sequence[Mark], end: float) -> dict[str, tuple[float, float]]:
    """stage -> (first start, end): the next stage's start or its own last "done"."""
    starts: dict[str, float] = {}
    for m in marks:
        if m.kind == STAGE_STARTED and m.stage and m.stage not in starts:
            starts[m.stage] = m.at
    order = sorted(starts.items(), key=lambda item: item[1])
    spans: dict[str, tuple[float, float]] = {}
    for i, (stage, start) in enumerate(order):
        done = [m.at for m in marks if m.stage == stage and m.kind == STAGE_DONE
                and m.at >= start]
        following = order[i + 1][1] if i + 1 < len(order) else end
        spans[stage] = (start, min([following, *done[-1:]]) if done else following)
    return spans


def role_name(index: int) -> str:
    """A node's row: ``master`` (index 0) or ``worker-N``."""
    return "master" if index == 0 else f"worker-{index}"


def bars(marks: Sequence[Mark], end: float | None = None,
         names: Mapping[str, str] | None = None) -> list[Bar]:
    """The chart of one command: a row per stage, then a row per node (its SSH wait and
    its bootstrap). ``end``: when the command ended (default: the last mark);
    ``names``: instance id -> the node's name (role_name), in index order."""
    if not marks:
        return []
    end = end if end is not None else max(m.at for m in marks)
    spans = _stage_spans(marks, end)
    out = [Bar(f"stage {stage}", stage, start, stop) for stage, (start, stop) in spans.items()]
    last: dict[tuple[str, str], float] = {}  # (node, stage) -> its last report
    for m in marks:
        if m.kind == PROGRESS and m.node and m.stage in PER_NODE and m.stage in spans:
            last[(m.node, m.stage)] = max(m.at, last.get((m.node, m.stage), m.at))
    names = names or {}
    order = {iid: k for k, iid in enumerate(names)}

    def key(item: tuple[tuple[str, str], float]) -> tuple[int, str, str]:
        (node, stage), _ = item
        return order.get(node, len(order)), node, stage

    return out + [Bar(names.get(node, f"node {node}"), stage, spans[stage][0], at)
                  for (node, stage), at in sorted(last.items(), key=key)]
