"""`up` as a plan and an apply: the AWS calls (all, and mutating) of a first `up` of 2
nodes and of a no-op second `up`, the seconds of the plan (from the start of `do_up` to
its question) and of the apply (from the answer to the end), median of --runs, beside
the figures of commit ff0ff03 (before the observe/plan/apply rework) and the goals of
issue 24: a first `up` makes at most 23 calls, a no-op `up` at most 5.

    .venv/bin/python bench/bench_plan_apply.py             # plain moto server, no SSH
    .venv/bin/python bench/bench_plan_apply.py --runs 5

Each run: `up` of a freshly named cluster (its question answered yes), `up` again (a
no-op: it has nothing to ask, so its plan is the whole run), `down`. A 1-node `up` and
`down` come first, not timed (the endpoint's first calls build its state). Only
`do_up(spec_file, yes=, confirm=, rt=, wait_ssh=False, timeout=)` and
`do_down(spec_file, yes=True, rt=)` are called, so the bench runs on any commit since
ff0ff03 (with bc5e71b's bench/bench_up.py, which makes `--moto` work).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import clusterkit  # noqa: E402
from bench.bench_up import _mutating, _runtime, _start, warm_up  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402

NODES = 2
GOALS = {"first up": 23, "no-op up": 5}  # issue 24, "Done when": at most this many calls


@dataclass(frozen=True)
class Measure:
    """One `up`: its AWS calls by operation before and after its question, and the
    seconds of its plan and its apply (``asked`` False: no question, no apply)."""

    plan_calls: Counter[str]
    apply_calls: Counter[str]
    plan_s: float
    apply_s: float
    asked: bool

    @property
    def calls(self) -> Counter[str]:
        return self.plan_calls + self.apply_calls


@dataclass(frozen=True)
class Row:
    """One kind of `up` (first, no-op) over all runs, as the report prints it: the calls
    (by operation, before and after the question) of the run that made the most, the
    median seconds; ``apply_s`` None where it never asked."""

    label: str
    plan_ops: dict[str, int]
    apply_ops: dict[str, int]
    plan_s: float
    apply_s: float | None
    varied: bool = False  # the runs did not all make the same calls

    @property
    def plan_calls(self) -> int:
        return sum(self.plan_ops.values())

    @property
    def calls(self) -> int:
        return self.plan_calls + sum(self.apply_ops.values())

    @property
    def mutating(self) -> int:
        return sum(_mutating(Counter(self.plan_ops) + Counter(self.apply_ops)).values())

    @property
    def plan_mutating(self) -> int:  # a plan is read-only: 0
        return sum(_mutating(Counter(self.plan_ops)).values())


# Measured on commit ff0ff03 (2026-11-26, with bc5e71b's bench_up.py fix, which is all
# that bc5e71b changed): moto server, 2 nodes, median of 9 runs on a 2-core machine
# (another 9 runs' medians there differed by up to 0.06 s). The "today" of issue 24;
# `--as-baseline` prints these rows for another commit.
BASELINE_COMMIT = "ff0ff03"
BASELINE = (
    Row("first up", plan_s=0.60, apply_s=0.18,
        plan_ops={"DescribeInstances": 1, "DescribeImages": 2, "DescribeAvailabilityZones": 1,
                  "GetSpotPlacementScores": 1, "DescribeInstanceTypeOfferings": 1,
                  "DescribeSpotPriceHistory": 1, "GetProducts": 1, "DescribeStacks": 1,
                  "DescribeVpcs": 1, "DescribeKeyPairs": 1},
        apply_ops={"DescribeInstances": 2, "DescribeStacks": 2, "ImportKeyPair": 1,
                   "GetRole": 1, "CreateStack": 1, "DescribeStackEvents": 1,
                   "DescribeSubnets": 1, "RunInstances": 1, "CreateTags": 2}),
    Row("no-op up", plan_s=0.40, apply_s=None,
        plan_ops={"DescribeInstances": 1, "DescribeStacks": 1, "DescribeVpcs": 1,
                  "DescribeImages": 1, "DescribeKeyPairs": 1},
        apply_ops={}),
)


def timed_up(spec: Path) -> Measure:
    """`up` of ``spec`` with a question that is answered yes and notes when it came."""
    calls: Counter[str] = Counter()
    at_question: list[tuple[float, Counter[str]]] = []

    def confirm(_question: str) -> bool:
        at_question.append((time.perf_counter(), Counter(calls)))
        return True

    start = time.perf_counter()
    do_up(str(spec), yes=False, confirm=confirm, rt=_runtime(calls), wait_ssh=False,
          timeout=600)
    end = time.perf_counter()
    if not at_question:
        return Measure(calls, Counter(), end - start, 0.0, asked=False)
    asked_at, before = at_question[0]
    return Measure(before, calls - before, asked_at - start, end - asked_at, asked=True)


def one_run(tmp: Path, index: int) -> tuple[Measure, Measure]:
    """A first and a no-op `up` of a new cluster, then its `down`."""
    spec = tmp / f"plan-apply-{index}.yaml"
    spec.write_text(spec_text("pa", NODES, placement_group=True))
    try:
        return timed_up(spec), timed_up(spec)
    finally:
        do_down(str(spec), yes=True, rt=_runtime(Counter()))


def summarize(label: str, runs: list[Measure]) -> Row:
    """The row of one kind of `up` over every run."""
    worst = max(runs, key=lambda m: sum(m.calls.values()))
    asked = [m.apply_s for m in runs if m.asked]
    return Row(label, dict(worst.plan_calls), dict(worst.apply_calls),
               statistics.median(m.plan_s for m in runs),
               statistics.median(asked) if asked else None,
               varied=any(m.calls != worst.calls for m in runs))


def tree_state() -> str:
    """The commit this bench runs on, and whether tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown commit"
    return head + (" + uncommitted changes" if git("status", "--porcelain",
                                                   "--untracked-files=no") else "")


def _seconds(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def _line(row: Row, tree: str) -> str:
    return (f"{row.label:<9} {tree:<16} {row.calls:>5} {row.plan_calls:>10} "
            f"{row.calls - row.plan_calls:>11} {row.mutating:>8} {row.plan_mutating:>13} "
            f"{_seconds(row.plan_s):>7} "
            f"{_seconds(row.apply_s):>8}" + ("  (calls varied between runs)"
                                              if row.varied else ""))


def _ops_lines(rows: list[Row], baseline: tuple[Row, ...]) -> list[str]:
    """Calls by operation, today's beside this tree's (all = in the plan + in the apply),
    for each kind of `up`."""
    def cell(row: Row, op: str) -> str:
        plan, apply = row.plan_ops.get(op, 0), row.apply_ops.get(op, 0)
        return f"{plan + apply} ({plan}+{apply})"

    lines = []
    for row, base in zip(rows, baseline, strict=True):
        ops = sorted(set(row.plan_ops) | set(row.apply_ops) | set(base.plan_ops)
                     | set(base.apply_ops))
        width = max([len(op) for op in ops] + [9])
        lines.append(f"\n{row.label}: AWS calls by operation, all (plan+apply)\n"
                     f"{'operation':<{width}} {'today':>9} {'this tree':>9}  (* differs)")
        lines += [f"{op:<{width}} {cell(base, op):>9} {cell(row, op):>9}"
                  + ("" if cell(base, op) == cell(row, op) else "  *") for op in ops]
    return lines


def report_lines(rows: list[Row], runs: int, tree: str,
                 baseline: tuple[Row, ...] = BASELINE) -> list[str]:
    """The whole report: the table (today, this tree), the goals, the calls by operation."""
    lines = [f"clusterkit up, {NODES} nodes, moto server (no SSH): calls are the most of "
             f"{runs} run(s), seconds their median",
             f"this tree: {tree}",
             f"{'up':<9} {'tree':<16} {'calls':>5} {'plan calls':>10} {'apply calls':>11} "
             f"{'mutating':>8} {'plan mutating':>13} {'plan s':>7} {'apply s':>8}"]
    for row, base in zip(rows, baseline, strict=True):
        lines += [_line(base, f"today ({BASELINE_COMMIT})"), _line(row, "this tree")]
    lines.append("")
    for row in rows:
        goal = GOALS[row.label]
        lines.append(f"goal: {row.label} <= {goal} calls: "
                     f"{'met' if row.calls <= goal else 'NOT met'} ({row.calls})")
    return lines + _ops_lines(rows, baseline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--as-baseline", action="store_true",
                        help="also print the rows as the BASELINE constant's source")
    args = parser.parse_args()
    logging.disable(logging.ERROR)  # moto's "Error on request" for the APIs it lacks
    # moto prints to stdout for the pricing endpoint it has no backend for: to stderr
    with tempfile.TemporaryDirectory() as tmpdir, contextlib.redirect_stdout(sys.stderr):
        tmp = Path(tmpdir)
        stop, _ = _start(True, tmp)
        try:
            warm_up(tmp, False)
            measured = [one_run(tmp, i) for i in range(args.runs)]
        finally:
            stop()
    rows = [summarize("first up", [first for first, _ in measured]),
            summarize("no-op up", [noop for _, noop in measured])]
    tree = f"{tree_state()} ({Path(clusterkit.__file__).parent.parent})"
    print("\n".join(report_lines(rows, args.runs, tree)))
    if args.as_baseline:
        print("\nBASELINE = (\n" + "".join(f"    {row!r},\n" for row in rows) + ")")


if __name__ == "__main__":
    main()
