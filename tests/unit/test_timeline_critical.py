"""plan.critical: the limit (critical path of AWS's calls and waits) of a command's
window and the overhead above it, as data (tests/unit/critical_cases: timeline records
and a window in; the limit, the overhead, the path and what it is made of out)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from clusterkit.timeline.critical import Interval, Kind, by_window, critical_path, intervals

CASES = sorted((Path(__file__).parent / "critical_cases").glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_critical_path_cases(case: Path):
    data = json.loads(case.read_text())
    got = critical_path(intervals(data["records"]), *data["window"])
    assert got.limit == pytest.approx(data["limit"], abs=1e-6), data["doc"]
    assert got.overhead == pytest.approx(data["overhead"], abs=1e-6)
    if data["overhead_pct"] is None:
        assert got.overhead_pct is None
    else:
        assert got.overhead_pct == pytest.approx(data["overhead_pct"], abs=1e-5)
    assert [[i.kind.value, i.what, i.resource] for i in got.chain] == data["chain"]
    assert all(a.end <= b.start + 0.001 for a, b in zip(got.chain, got.chain[1:], strict=False))
    if "parts" in data:
        assert [[p.kind.value, p.what, p.count, pytest.approx(p.seconds)]
                for p in got.parts()] == data["parts"]


def test_the_limit_is_never_above_the_union_nor_below_the_longest_interval():
    """Against brute force on random small timelines: the chain is the best of every
    subset of pairwise non-overlapping intervals."""
    rng = random.Random(25)
    for _ in range(200):
        items = []
        for n in range(rng.randint(0, 7)):
            start = round(rng.uniform(0, 10), 2)
            items.append(Interval(Kind.WAIT, f"w{n}", "", start,
                                  round(start + rng.uniform(0.05, 4), 2)))
        got = critical_path(items, 0.0, 12.0).limit
        best = 0.0
        for mask in range(1 << len(items)):
            chosen = sorted((items[k] for k in range(len(items)) if mask >> k & 1),
                            key=lambda i: i.start)
            if all(a.end <= b.start + 0.001 for a, b in zip(chosen, chosen[1:], strict=False)):
                best = max(best, sum(min(i.end, 12.0) - i.start for i in chosen))
        assert got == pytest.approx(best)


def test_by_window_gives_each_stage_its_own_limit():
    items = intervals([
        {"kind": "call", "what": "CreateStack", "start": 0.0, "end": 0.3},
        {"kind": "wait", "what": "instance pending -> running", "resource": "i-1",
         "start": 1.0, "end": 3.0},
    ])
    got = by_window(items, {"stack": (0.0, 1.0), "launch": (1.0, 4.0)})
    assert list(got) == ["stack", "launch"]
    assert (got["stack"].limit, got["stack"].overhead) == (pytest.approx(0.3),
                                                           pytest.approx(0.7))
    assert (got["launch"].limit, got["launch"].overhead) == (2.0, 1.0)


def test_a_window_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="ends"):
        critical_path([], 2.0, 1.0)
