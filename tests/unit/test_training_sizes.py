"""An elastic job's size over time as data (training_sizes/cases.json): the master's
changes and the job's end -> the spans at each size, the node-hours at each size, and
the line `train`, `status` and the report print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterkit.training import sizes

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "training_sizes" / "cases.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["about"][:40])
def test_sizes_over_time(case: dict[str, Any]) -> None:
    changes = [(float(at), int(n)) for at, n in case["changes"]]
    got = sizes.spans(changes, case["end"])
    assert [[s.nodes, s.start, s.end] for s in got] == case["spans"]
    hours = sizes.node_hours_by_size(changes, case["end"])
    assert {str(n): round(h, 4) for n, h in hours.items()} == case["node_hours"]
    assert list(hours) == sorted(hours, reverse=True)
    assert sizes.describe(changes, case["end"], case["full"]) == case["line"]


def test_while_it_runs_the_size_now_comes_first_then_the_size_over_time() -> None:
    """What `train`, `status` and `top` print: the size now while the job runs (of the
    full size, its first record), the size over time once it changed; nothing for a job
    that is not elastic."""
    changes = [(0.0, 3), (60.0, 2)]
    assert sizes.lines(changes, 90.0, running=True) == [
        "size: 2 of 3 nodes",
        "nodes over time (of 3): 3 (60 s) -> 2 (30 s); node-hours 0.0500 at 3, 0.0167 at 2"]
    assert sizes.lines(changes, 90.0, running=False) == [
        "nodes over time (of 3): 3 (60 s) -> 2 (30 s); node-hours 0.0500 at 3, 0.0167 at 2"]
    assert sizes.lines([(0.0, 3)], 90.0, running=True) == ["size: 3 of 3 nodes"]
    assert sizes.lines([(0.0, 3)], 90.0, running=False) == []
    assert sizes.lines([], 90.0, running=True) == []
    # the newest change is the size now, whatever order the record is in
    assert sizes.now([(60.0, 2), (0.0, 3), (80.0, 3)], 3) == "size: 3 of 3 nodes"
