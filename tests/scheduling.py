"""The order the suite's work units are handed to the xdist processes: the longest
first (tests/durations.json, from an earlier run's ``--durations=0``), so no process is
left with a long module while the others have finished (a sandbox module's tests run
in one process, up to five minutes). Unknown units count as their directory's typical
length. Only the order changes: a stale or missing file makes the run slower, never
different. ``python -m tests.scheduling LOG`` rewrites the file from a run's log."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")
# a unit not in the file: what a test of that directory typically takes, in seconds
TYPICAL = {"tests/e2e/": 20.0, "tests/integration/": 3.0}
DEFAULT = 0.1
KEEP_ABOVE = 1.0  # seconds: shorter units are left out of the file
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S+)$")


def load(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per work unit (a grouped module's path, or a test's node id)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def expected(unit: str, known: dict[str, float]) -> float:
    if unit in known:
        return known[unit]
    return next((s for prefix, s in TYPICAL.items() if unit.startswith(prefix)), DEFAULT)


def longest_first(nodeids: Iterable[str], unit_of: Callable[[str], str],
                  known: dict[str, float]) -> list[str]:
    """``nodeids`` reordered so the units expected to take longest come first; the
    order within a unit, and between units of equal length, is kept."""
    ids = list(nodeids)
    return sorted(ids, key=lambda nodeid: -expected(unit_of(nodeid), known))


def from_log(lines: Iterable[str], unit_of: Callable[[str], str]) -> dict[str, float]:
    """Seconds per unit, summed from pytest's ``--durations`` lines; units of at least
    KEEP_ABOVE seconds, longest first."""
    totals: dict[str, float] = {}
    for line in lines:
        if m := _LINE.match(line.strip()):
            unit = unit_of(m.group(2))
            totals[unit] = totals.get(unit, 0.0) + float(m.group(1))
    kept = {u: round(s, 1) for u, s in totals.items() if s >= KEEP_ABOVE}
    return dict(sorted(kept.items(), key=lambda item: -item[1]))


def main(argv: list[str]) -> int:
    from tests.conftest import work_unit

    if len(argv) != 1:
        print("usage: python -m tests.scheduling LOG  (a run with --durations=0)",
              file=sys.stderr)
        return 2
    root = Path(__file__).parents[1]
    unit_of = work_unit(root)
    with open(argv[0], encoding="utf-8") as log:
        found = from_log(log, unit_of)
    DURATIONS.write_text(json.dumps(found, indent=1) + "\n")
    print(f"{DURATIONS}: {len(found)} units, {sum(found.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
