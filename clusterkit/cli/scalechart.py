"""`clusterkit scaling`'s chart, drawn by matplotlib (cli/charts.py): for each node
count, the measured speedup beside the ideal (linear) one, as bars, 720 x 440 pixels
whatever the number of runs, labelled axes, each measured bar's value and efficiency
over it, and the legend inside the plot."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clusterkit.cli import charts
from clusterkit.training.scaling import Row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

IDEAL, MEASURED, AXIS = "#c8c8c8", "#286ec8", "#3c3c3c"
WIDTH, HEIGHT = 720, 440
BAR = 0.38  # a bar's width, of a node count's slot


def figure(rows: Sequence[Row], title: str) -> Figure:
    """Bars of ideal and measured speedup per node count (the smallest run is 1.0)."""
    base = rows[0].nodes if rows else 1
    ideal = [r.nodes / base for r in rows]
    fig = charts.new_figure(WIDTH, HEIGHT)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.86, bottom=0.14)
    ax = fig.add_subplot()
    slots = range(len(rows))
    ax.bar([k - BAR / 2 for k in slots], ideal, BAR, color=IDEAL,
           label="ideal (linear in nodes)")
    measured = ax.bar([k + BAR / 2 for k in slots], [r.speedup or 0.0 for r in rows], BAR,
                      color=MEASURED, label="measured (% of linear)")
    ax.bar_label(measured, labels=[_over(r) for r in rows], color=MEASURED, fontsize=8,
                 padding=3)
    ax.set_xticks(list(slots), labels=[str(r.nodes) for r in rows])
    ax.set_ylim(0, max([*ideal, *(r.speedup or 0 for r in rows), 1.0]) * 1.18)
    ax.yaxis.set_major_formatter(lambda value, _: f"{value:g}x")
    ax.set_xlabel("nodes (the first k of the cluster)", color=AXIS)
    ax.set_ylabel("speedup", color=AXIS)
    ax.grid(axis="y", color="#e6e6e6")
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(title, x=0.1, ha="left", fontsize=12, fontweight="bold", color=AXIS)
    return fig


def _over(row: Row) -> str:
    """What a measured bar says over it: the speedup and the efficiency."""
    if row.speedup is None:
        return ""
    return f"{row.speedup:.2f}x" + ("" if row.efficiency is None else f" {row.efficiency:.0f}%")


def write(path: str | os.PathLike[str], rows: Sequence[Row], title: str) -> Path:
    """The chart written to ``path``, PNG or SVG by its suffix, whole or not at all."""
    return charts.save(figure(rows, title), path)
