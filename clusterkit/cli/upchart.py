"""`clusterkit up --timeline FILE.png` and `clusterkit status NAME --timeline FILE.png`:
the last `up` of a cluster on this machine (cluster.ops.uprecord) drawn as a timeline
(plan.uptimeline's bars, cli.timeline's PNG): a row per stage and per node (master,
worker-N), the axis from the command's start to its end, as long as the title says."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console

from clusterkit.errors import ClusterkitError, UsageError

SUFFIXES = (".png",)  # what cli.timeline writes

TIMELINE_OPTION = click.option(
    "--timeline", "timeline", type=click.Path(dir_okay=False), default=None,
    metavar="FILE.png", help="Draw what the last `up` of the cluster waited for, as a PNG "
    "timeline (the name must end in .png): a row per stage and per node.")


def check_path(path: str | None) -> None:
    """UsageError (exit 2) before anything runs when the chart cannot be written there,
    or not in a format its suffix names."""
    if path is None:
        return
    if Path(path).suffix.lower() not in SUFFIXES:
        raise UsageError(f"--timeline {path}: the chart is a PNG; the file name must end "
                         f"in {' or '.join(SUFFIXES)}",
                         f"e.g. --timeline {Path(path).with_suffix('.png').name}")
    folder = Path(path).expanduser().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise UsageError(f"--timeline {path}: {folder} is not a directory you can write to",
                         "give a path in an existing, writable directory")


def draw(console: Console, cluster: str, path: str) -> Path:
    """Write the chart of the last `up` of ``cluster`` to ``path``; ClusterkitError (exit
    1) when this machine has no record of one."""
    from clusterkit.cli import timeline as chart
    from clusterkit.cluster.ops import uprecord
    from clusterkit.plan.uptimeline import bars

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
