"""The record of the last `up` of a cluster: every event it reported, with when
(``<state>/clusters/NAME/up-timeline.json``), for `clusterkit up --timeline FILE.png`
and `clusterkit status NAME --timeline FILE.png` (plan.uptimeline makes the bars)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterkit import statedir
from clusterkit.events import Event, Reporter
from clusterkit.plan.uptimeline import Mark

FILE = "up-timeline.json"
VERSION = 1


@dataclass
class Recording:
    """A reporter that keeps a ``Mark`` of every event, then passes it on."""

    report: Reporter
    clock: Callable[[], float] = time.monotonic
    marks: list[Mark] = field(default_factory=list)
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


def save(cluster: str, recording: Recording, ok: bool) -> None:
    """Keep ``recording`` as the cluster's last `up` (``ok``: it ended without error)."""
    body = {"version": VERSION, "cluster": cluster, "started": recording.wall_start,
            "seconds": round(recording.elapsed(), 3), "ok": ok,
            "marks": [m.to_json() for m in recording.marks]}
    statedir.write_private(statedir.ensure_cluster_dir(cluster) / FILE,
                           json.dumps(body, indent=1) + "\n")


def load(cluster: str) -> dict[str, Any] | None:
    """The last `up`'s record ({started, seconds, ok, marks: [Mark]}), or None."""
    try:
        data = json.loads((statedir.cluster_dir(cluster) / FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    return {**data, "marks": [Mark.from_json(m) for m in data.get("marks", [])]}
