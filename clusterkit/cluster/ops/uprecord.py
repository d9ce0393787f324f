"""The record of the last `up` of a cluster: every event it reported, with when
(``<state>/clusters/NAME/up-timeline.json``), for `clusterkit up --timeline FILE.png`
and `clusterkit status NAME --timeline FILE.png` (plan.uptimeline makes the bars)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from clusterkit import statedir
from clusterkit.events import Event, Reporter
from clusterkit.plan.nodes import Node, node_order
from clusterkit.timeline.uptimeline import Mark, role_name

FILE = "up-timeline.json"
VERSION = 1


@dataclass
class Recording:
    """A reporter that keeps a ``Mark`` of every event, then passes it on; ``names``:
    instance id -> the node's role name (master, worker-N), in index order."""

    report: Reporter
    clock: Callable[[], float] = time.monotonic
    marks: list[Mark] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    started: float = field(default=0.0)
    wall_start: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def __call__(self, event: Event) -> None:
        self.marks.append(Mark(self.clock() - self.started, event.kind.value,
                               event.stage.value if event.stage else None, event.node))
        self.report(event)

    def elapsed(self) -> float:
        return self.clock() - self.started


def name_nodes(report: Reporter, nodes: Iterable[Node]) -> None:
    """Tell the recording (when ``report`` is one) each node's role name, for the
    chart's rows; a node without an index keeps its instance id."""
    if isinstance(report, Recording):
        ordered = sorted((n for n in nodes if n.index is not None), key=node_order)
        report.names = {n.instance_id: role_name(n.index or 0) for n in ordered}


def save(cluster: str, recording: Recording, ok: bool) -> None:
    """Keep ``recording`` as the cluster's last `up` (``ok``: it ended without error)."""
    body = {"version": VERSION, "cluster": cluster, "started": recording.wall_start,
            "seconds": round(recording.elapsed(), 3), "ok": ok,
            "marks": [m.to_json() for m in recording.marks], "names": recording.names}
    statedir.write_private(statedir.ensure_cluster_dir(cluster) / FILE,
                           json.dumps(body, indent=1) + "\n")


def load(cluster: str) -> dict[str, Any] | None:
    """The last `up`'s record ({started, seconds, ok, marks: [Mark], names: {instance
    id: role name}}; an older record has no names), or None."""
    try:
        data = json.loads((statedir.cluster_dir(cluster) / FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    names = data.get("names")
    return {**data, "marks": [Mark.from_json(m) for m in data.get("marks", [])],
            "names": {str(k): str(v) for k, v in names.items()} if isinstance(names, dict)
            else {}}
