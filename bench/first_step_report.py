"""bench/bench_first_step.py's report: the table of every command and size, each
command's stages, the CPU floor, the goals of issue 25 item 4 (met / NOT met, and where
a missed one's time went), and the PNG timelines."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from clusterkit.cli import timeline as chart
from clusterkit.timeline import critical

if TYPE_CHECKING:
    from bench.bench_first_step import Run

GOAL_FIRST, GOAL_OVERHEAD, GOAL_NOOP, GOAL_DEPLOY = 1.25, 15.0, 1.5, 1.5
FIRST = "up -> first step"
BEFORE_UP = "up -> first step, before"  # bench_first_step --compare
BEFORE_DEPLOY = "deploy-dataset, before"


def _pct(limit: critical.Limit) -> str:
    return "-" if limit.overhead_pct is None else f"{limit.overhead_pct:.0f}%"


def _parts(limit: critical.Limit, most: int = 3) -> str:
    return "; ".join(f"{p.what} {p.count}x {p.seconds:.2f} s" for p in limit.parts()[:most])


def table(runs: list[Run]) -> list[str]:
    base = {}
    for r in runs:
        base.setdefault(r.what, r.limit.wall)
    out = [f"{'command':<17} {'nodes':>5} {'wall s':>7} {'ratio':>6} {'limit s':>7} "
           f"{'overhead s':>10} {'overhead':>8}  the critical path's largest parts"]
    for r in sorted(runs, key=lambda r: (list(base).index(r.what), r.nodes)):
        out.append(f"{r.what:<17} {r.nodes:>5} {r.limit.wall:>7.2f} "
                   f"{r.limit.wall / base[r.what]:>6.2f} {r.limit.limit:>7.2f} "
                   f"{r.limit.overhead:>10.2f} {_pct(r.limit):>8}  {_parts(r.limit)}")
    return out


def cpu_wall(run: Run, stage: str) -> float:
    """The wall the emulation's CPU in a stage needs on this machine: what every process
    but the client spent in it, over the cores (other work on the machine counts too)."""
    return max(run.stage_cpu.get(stage, 0.0), 0.0) / (os.cpu_count() or 1)


def floor(run: Run) -> float:
    """The least wall this machine allows the command, run as clusterkit runs it: each
    stage at least as long as AWS's limit in it and as the emulation's CPU in it needs
    over the cores (on AWS each node brings its own CPU)."""
    return sum(max(lim.limit, cpu_wall(run, s)) for s, lim in run.stages.items())


def stage_table(runs: list[Run]) -> list[str]:
    """One command's stages at every size: wall s (AWS's limit s) [CPU's wall s]."""
    stages = list(dict.fromkeys(s for r in runs for s in r.stages))
    width = max(len(s) for s in stages)
    out = [f"{runs[0].what}: seconds per stage: wall (AWS's limit in it) [the emulation's "
           f"CPU in it over {os.cpu_count()} cores]",
           f"{'stage':<{width}} " + " ".join(f"{f'{r.nodes} node(s)':>23}" for r in runs)]
    for s in stages:
        cells = [f"{r.stages[s].wall:>6.2f} ({r.stages[s].limit:>5.2f}) [{cpu_wall(r, s):>5.2f}]"
                 if s in r.stages else "-" for r in runs]
        out.append(f"{s:<{width}} " + " ".join(f"{c:>23}" for c in cells))
    return out


def grew(small: Run, big: Run, most: int = 2) -> str:
    """The stages whose time grew most from the small run to the big one."""
    def delta(s: str) -> float:
        return big.stages[s].wall - (small.stages[s].wall if s in small.stages else 0.0)

    def was(s: str, what: str) -> float:
        return getattr(small.stages[s], what) if s in small.stages else 0.0

    top = sorted(big.stages, key=delta, reverse=True)[:most]
    return "; ".join(f"stage {s} {was(s, 'wall'):.2f} s -> {big.stages[s].wall:.2f} s "
                     f"(+{delta(s):.2f} s, of it AWS's limit "
                     f"+{big.stages[s].limit - was(s, 'limit'):.2f} s; its CPU needs "
                     f"{cpu_wall(big, s):.2f} s of wall here)" for s in top)


def heaviest(run: Run, most: int = 2) -> str:
    """The stages holding most of a run's overhead."""
    top = sorted(run.stages.items(), key=lambda kv: kv[1].overhead, reverse=True)[:most]
    return "; ".join(f"stage {s} holds {lim.overhead:.2f} s of the {run.limit.overhead:.2f} s "
                     f"(its limit {lim.limit:.2f} s; its CPU needs {cpu_wall(run, s):.2f} s "
                     f"of wall here)" for s, lim in top)


def goals(runs: list[Run]) -> list[str]:
    def of(what: str) -> list[Run]:
        return sorted((r for r in runs if r.what == what), key=lambda r: r.nodes)

    out = ["goals (issue 25 item 4):"]
    for what, goal, name in ((FIRST, GOAL_FIRST, "to the first step"),
                             ("no-op up", GOAL_NOOP, "no-op up"),
                             ("deploy-dataset", GOAL_DEPLOY, "deploy-dataset")):
        rows = of(what)
        if len(rows) < 2:
            continue
        small, big = rows[0], rows[-1]
        ratio = big.limit.wall / small.limit.wall
        met = ratio <= goal
        out.append(f"  {name}: {big.nodes} nodes {ratio:.2f}x {small.nodes} node(s) (goal at "
                   f"most {goal:g}x): {'met' if met else 'NOT met'}"
                   + ("" if met else f"; where the time went: {grew(small, big)}"))
        if not met and floor(big) > goal * small.limit.wall:
            out.append(f"    out of reach on this machine: AWS's limit and emulating "
                       f"{big.nodes} nodes (their work, their jobs) need at least "
                       f"{floor(big):.2f} s on {os.cpu_count()} cores, "
                       f"{floor(big) / small.limit.wall:.2f}x one node's whole window")
    firsts = of(FIRST)
    for r in {id(r): r for r in (firsts[:1] + firsts[-1:])}.values():
        pct = r.limit.overhead_pct
        met = pct is not None and pct <= GOAL_OVERHEAD
        out.append(f"  overhead at {r.nodes} node(s): {r.limit.overhead:.2f} s above a "
                   f"{r.limit.limit:.2f} s limit = {_pct(r.limit)} (goal at most "
                   f"{GOAL_OVERHEAD:g}%): {'met' if met else 'NOT met'}"
                   + ("" if met else f"; {heaviest(r)}"))
        if not met:
            above = r.limit.wall - floor(r)
            out.append(f"    above this machine's floor ({floor(r):.2f} s: the limit and the "
                       f"emulation's CPU) {above:.2f} s, "
                       f"{100 * above / r.limit.limit if r.limit.limit else 0:.0f}% of the "
                       f"limit: the overhead net of what emulating the nodes costs here")
    return out


def charts(runs: list[Run], where: Path) -> list[str]:
    where.mkdir(parents=True, exist_ok=True)
    out = []
    for r in runs:
        slug = r.what.replace(" -> ", "-").replace(" ", "-")
        title = (f"{r.what}, {r.nodes} node(s): {r.limit.wall:.2f} s, limit "
                 f"{r.limit.limit:.2f} s, overhead {_pct(r.limit)}")
        out.append(str(chart.write(where / f"{slug}-{r.nodes}.png", r.bars, title=title,
                                   marks=r.marks, origin=r.limit.start)))
    return out


def report(runs: list[Run], args: argparse.Namespace, poll: float) -> list[str]:
    out = [f"time to the first step: timed sandbox (--timings aws:{args.scale:g}), "
           f"poll {poll:g} s, {os.cpu_count()} cores", *table(runs), ""]
    for what in dict.fromkeys(r.what for r in runs):
        out += stage_table([r for r in runs if r.what == what]) + [""]
    from bench import first_step_goals41 as issue41

    return (out + cpu_table(runs) + [""] + compare(runs) + issue41.recorded(runs, args.scale)
            + goals(runs) + issue41.goals(runs, args.scale))


def compare(runs: list[Run]) -> list[str]:
    """`up` -> first step and deploy-dataset as before issue 25 item 3 and now, at each
    size (--compare)."""
    out = []
    for was, now in ((BEFORE_UP, FIRST), (BEFORE_DEPLOY, "deploy-dataset")):
        before = {r.nodes: r for r in runs if r.what == was}
        for r in runs:
            if r.what == now and r.nodes in before:
                b = before[r.nodes]
                gain = b.limit.wall - r.limit.wall
                out.append(f"  {now}, {r.nodes} node(s): {b.limit.wall:.2f} s -> "
                           f"{r.limit.wall:.2f} s ({abs(gain):.2f} s "
                           f"{'sooner' if gain >= 0 else 'later'}, "
                           f"{r.limit.wall / b.limit.wall:.2f}x); AWS's limit "
                           f"{b.limit.limit:.2f} s -> {r.limit.limit:.2f} s, overhead "
                           f"{_pct(b.limit)} -> {_pct(r.limit)}")
    if not out:
        return []
    return ["issue 25 item 3, before and now in this run (before: the launch waited for "
            "the whole stack, its instance profile too; the EFS mount target was made after "
            "the SSH wait; the bootstrap ran every node's facts before any node's steps; "
            "deploy-dataset attached the clones once all were available):", *out, ""]


def cpu_table(runs: list[Run]) -> list[str]:
    out = ["up -> first step: CPU seconds (nodes: their sshd and all it reaped; emulation: "
           "every process but the client, the nodes' jobs too), and this machine's floor "
           "(each stage at least its limit and its emulation CPU over "
           f"{os.cpu_count()} cores)",
           f"{'nodes':>5} {'nodes cpu':>9} {'sandbox cpu':>11} {'client cpu':>10} "
           f"{'emulation cpu':>13} {'limit s':>7} {'floor s':>7} {'wall s':>7} "
           f"{'above floor':>11}"]
    for r in runs:
        if r.cpu is not None and r.what == FIRST:
            out.append(f"{r.nodes:>5} {r.cpu.nodes:>9.2f} {r.cpu.sandbox:>11.2f} "
                       f"{r.cpu.client:>10.2f} {r.busy:>13.2f} {r.limit.limit:>7.2f} "
                       f"{floor(r):>7.2f} {r.limit.wall:>7.2f} "
                       f"{r.limit.wall - floor(r):>11.2f}")
    return out
