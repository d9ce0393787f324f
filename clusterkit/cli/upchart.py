"""`clusterkit up --timeline FILE.png|FILE.svg` and `clusterkit status NAME --timeline
FILE`: the last `up` of a cluster on this machine (cluster.ops.uprecord) drawn as a
timeline (plan.uptimeline's bars, cli.timeline's chart, PNG or SVG by the suffix): a row
per stage and per node (master, worker-N), the axis from the command's start to its
end, as long as the title says."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console

from clusterkit.cli import charts
from clusterkit.errors import ClusterkitError, UsageError

TIMELINE_OPTION = click.option(
    "--timeline", "timeline", type=click.Path(dir_okay=False), default=None,
    metavar="FILE.png|.svg", help="Draw what the last `up` of the cluster waited for, as a "
    "timeline (PNG or SVG by the name's suffix; needs the charts extra): a row per stage "
    "and per node.")


def check_path(path: str | None) -> None:
    """Before anything runs: UsageError (exit 2) when the chart cannot be written there
    or in a format its suffix names; ClusterkitError (exit 1) naming the extra when
    matplotlib is missing."""
    if path is None:
        return
    charts.format_of(path, "--timeline")
    folder = Path(path).expanduser().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise UsageError(f"--timeline {path}: {folder} is not a directory you can write to",
                         "give a path in an existing, writable directory")
    charts.require()


def draw(console: Console, cluster: str, path: str) -> Path:
    """Write the chart of the last `up` of ``cluster`` to ``path``; ClusterkitError (exit
    1) when this machine has no record of one."""
    from clusterkit.cli import timeline as chart
    from clusterkit.cluster.ops import uprecord
    from clusterkit.timeline.uptimeline import bars

    last = uprecord.load(cluster)
    drawn = bars(last["marks"], end=last["seconds"], names=last["names"]) if last else []
    if last is None or not drawn:
        raise ClusterkitError(f"no record of an `up` of cluster {cluster} on this machine",
                              f"`clusterkit up SPEC --timeline {path}` records and draws one")
    outcome = "" if last["ok"] else ", failed"
    written = chart.write(Path(path).expanduser(), drawn, origin=0.0, end=last["seconds"],
                          title=f"clusterkit up {cluster}: {last['seconds']:.1f} s{outcome}")
    console.print(f"timeline of the last `up` of {cluster}: {written}", markup=False,
                  highlight=False, soft_wrap=True)  # a path to copy: never folded
    return written
