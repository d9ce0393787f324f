"""bench/bench_first_step.py's goals of issue 41 (printed, never asserted) and today's
figures before it, recorded (the stack then made the instance profiles:
docs/howto/first-step.md's table of 2026-11-26, commit 802936a, at `aws:1`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from bench.first_step_image import IMAGE_UP, YOURS_UP
from bench.first_step_report import FIRST, _pct, floor, heaviest

if TYPE_CHECKING:
    from bench.bench_first_step import Run

SECOND = "second cluster -> first step"  # bench_first_step --second: its `up` and job
# before issue 41, at AWS's own times (aws:1): nodes -> (wall s, limit s)
RECORDED_AWS1 = {1: (153.31, 147.48), 16: (173.76, 147.52)}
GOAL_NEW_S, GOAL_IMAGE_S, GOAL_ENV_S, GOAL_WIDE = 90.0, 60.0, 10.0, 1.1
PACKAGES = Path(__file__).with_name("packages_mxnet_cu112.json")  # sizes from the index


def recorded(runs: list[Run], scale: float) -> list[str]:
    """Each `up` -> first step beside the figures before issue 41 (at aws:1 only: the
    recorded figures are AWS's own seconds)."""
    if scale != 1:
        return []
    out = []
    for r in runs:
        if r.what in (FIRST, SECOND) and r.nodes in RECORDED_AWS1:
            wall, limit = RECORDED_AWS1[r.nodes]
            out.append(f"  {r.what}, {r.nodes} node(s): {wall:.2f} s -> {r.limit.wall:.2f} s "
                       f"({wall - r.limit.wall:.2f} s sooner, {r.limit.wall / wall:.2f}x); "
                       f"AWS's limit {limit:.2f} s -> {r.limit.limit:.2f} s")
    if not out:
        return []
    return ["issue 41, before (recorded at aws:1, commit 802936a: the stack made the "
            "instance profiles, CloudFormation's two minutes) and now:", *out, ""]


def _where(r: Run) -> str:
    parts = "; ".join(f"{p.what} {p.seconds:.2f} s" for p in r.limit.parts()[:2])
    return (f"the critical path's largest parts: {parts}; {heaviest(r, 1)}; this machine's "
            f"floor {floor(r):.2f} s")


def goals(runs: list[Run], scale: float) -> list[str]:
    """The goals of issue 41 item 4 in AWS's seconds (a run's seconds / SCALE)."""
    out = [f"goals (issue 41 item 4; AWS's seconds: this run's / {scale:g}):"]
    for r in sorted((r for r in runs if r.what in (FIRST, SECOND)),
                    key=lambda r: (r.what, r.nodes)):
        aws = r.limit.wall / scale
        met = aws <= GOAL_NEW_S
        out.append(f"  {r.what}, {r.nodes} node(s), new cluster with EFS: {aws:.1f} s "
                   f"(goal at most {GOAL_NEW_S:g} s): {'met' if met else 'NOT met'}; "
                   f"overhead {_pct(r.limit)}" + ("" if met else f"; {_where(r)}"))
    firsts = sorted((r for r in runs if r.what == FIRST), key=lambda r: r.nodes)
    if len(firsts) > 1:
        small, big = firsts[0], firsts[-1]
        ratio = big.limit.wall / small.limit.wall
        out.append(f"  {big.nodes} nodes {ratio:.2f}x {small.nodes} node(s) (goal at most "
                   f"{GOAL_WIDE:g}x): {'met' if ratio <= GOAL_WIDE else 'NOT met'}"
                   + ("" if ratio <= GOAL_WIDE else f"; {_where(big)}"))
    for r in (r for r in runs if r.what == IMAGE_UP):  # the goal is YOURS_UP's
        out.append(f"  {r.what}, {r.nodes} node(s), on an image with a new file system: "
                   f"{r.limit.wall / scale:.1f} s (no goal of its own: the {GOAL_IMAGE_S:g} s "
                   f"one is for an existing file system); {_where(r)}")
    for r in (r for r in runs if r.what == YOURS_UP):
        aws = r.limit.wall / scale
        met = aws <= GOAL_IMAGE_S
        out.append(f"  {r.what}, {r.nodes} node(s), on an image and an existing file system: "
                   f"{aws:.1f} s (goal at most {GOAL_IMAGE_S:g} s): "
                   f"{'met' if met else 'NOT met'}; overhead {_pct(r.limit)}"
                   + ("" if met else f"; {_where(r)}"))
    if not any(r.what == IMAGE_UP for r in runs):
        out.append(f"  with an image at most {GOAL_IMAGE_S:g} s, and the env step with "
                   f"packages at most {GOAL_ENV_S:g} s a node: not measured (--image)")
    else:
        out.append(f"  the env step with an image at most {GOAL_ENV_S:g} s a node: the "
                   "lines 'env step per node' below")
    return out + [f"    {download_model()}"]


def download_model() -> str:
    """What the tutorial's GPU stack costs each node to download (a model from the
    index's sizes and a sourced rate: no run)."""
    data = json.loads(PACKAGES.read_text())
    size = sum(p["bytes"] for p in data["packages"]) / 1e6
    rate = data["rate"]["megabytes_per_second"]
    return (f"model, not measured: train.packages [mxnet-cu112] downloads {size:.0f} MB "
            f"({len(data['packages'])} wheels, {PACKAGES.name}), {size / rate:.1f} s a node "
            f"at {rate} MB/s, on every node of every fresh `up`, before installing them; "
            "with storage.efs the wheel cache downloads them once per cluster")
