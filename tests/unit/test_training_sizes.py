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
