"""A timeline chart, drawn by matplotlib (cli/charts.py): one row per node, AWS resource
or stage, a bar per stage or wait, so a reader sees at a glance what overlapped and what
waited in series (`clusterkit up --timeline`, `status --timeline`, bench_first_step's
charts). PNG or SVG by the file's suffix.

The input is a list of bars ``(row, label, start, end)``: a tuple, a ``Bar`` or any
object with those four attributes. Rows are drawn top to bottom in the order they first
appear; a label has one colour wherever it appears, and the legend names it. Times are
seconds on any one clock (wall-clock or since the command started): the axis counts
from the earliest bar (or ``origin``) to the latest bar's end (or ``end``), and that end
is labelled with its own time (``4.3s``), as a title that gives the command's duration."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from clusterkit.cli import charts

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

ROW_PX, LEGEND_PX, MARK_PX, CHAR_PX = 22, 18, 14, 6.5  # sizes in pixels at charts.DPI
MAX_ROW_NAME, MAX_LEGEND = 44, 40  # characters of a row's name, of a legend entry shown
MARK_LINES = 3  # lines for the marks' names, staggered when close
INK, MARK = "#141414", "#c80000"
END_GAP = 0.04  # a round tick this close to the axis's end (of the span) loses its label


class Bar(NamedTuple):
    row: str
    label: str
    start: float
    end: float


def as_bar(item: Any) -> Bar:
    """A tuple (row, label, start, end) or an object with those attributes."""
    if isinstance(item, tuple):
        row, label, start, end = item
    else:
        row, label, start, end = item.row, item.label, item.start, item.end
    return Bar(str(row), str(label), float(start), float(end))


def _short(name: str, most: int) -> str:
    return name if len(name) <= most else name[:most - 1] + "~"


class Layout(NamedTuple):
    """Rows, labels (in colour order), the axis's origin and span, the legend's columns
    and the figure's size in pixels."""

    rows: list[str]
    labels: list[str]
    t0: float
    span: float
    per_line: int
    left_px: float
    top_px: float
    bottom_px: float
    height: int

    @classmethod
    def of(cls, bars: list[Bar], width: int, title: str, marks: int,
           origin: float | None, end: float | None) -> Layout:
        rows = list(dict.fromkeys(b.row for b in bars))
        labels = list(dict.fromkeys(b.label for b in bars))
        t0 = origin if origin is not None else min(b.start for b in bars)
        last = max(b.end for b in bars) if end is None else end
        longest = min(max(len(label) for label in labels), MAX_LEGEND)
        per_line = max(1, int((width - 20) // (28 + CHAR_PX * longest)))
        left_px = 16 + CHAR_PX * max(len(_short(r, MAX_ROW_NAME)) for r in rows)
        top_px = 12 + (28 if title else 0) + (MARK_LINES * MARK_PX + 6 if marks else 8)
        bottom_px = 44 + LEGEND_PX * math.ceil(len(labels) / per_line)
        height = int(top_px + ROW_PX * len(rows) + bottom_px)
        return cls(rows, labels, t0, max(last - t0, 1e-9), per_line, left_px, top_px,
                   bottom_px, height)

    def color(self, label: str) -> Any:
        from matplotlib import colormaps
        return colormaps["tab20"](self.labels.index(label) % 20)


def figure(bars: Iterable[Any], *, title: str = "", width: int = 1100,
           marks: Sequence[tuple[str, float]] = (), origin: float | None = None,
           end: float | None = None) -> Figure:
    """The chart as a matplotlib Figure. ``marks``: (name, time) drawn as vertical
    lines (the end of `up`, the first step); ``origin``: the time the axis counts from;
    ``end``: the time it ends at (the command's end)."""
    items = [as_bar(b) for b in bars]
    if not items:
        raise ValueError("a timeline needs at least one bar")
    lay = Layout.of(items, width, title, len(marks), origin, end)
    fig = charts.new_figure(width, lay.height)
    fig.subplots_adjust(left=lay.left_px / width, right=1 - 12 / width,
                        top=1 - lay.top_px / lay.height, bottom=lay.bottom_px / lay.height)
    ax = fig.add_subplot()
    _rows(ax, lay)
    _bars(ax, lay, items, width)
    _axis(ax, lay)
    _marks(ax, lay, marks, width)
    if title:
        fig.text(0.01, 1 - 10 / lay.height, title, va="top", fontsize=12,
                 fontweight="bold", color=INK)
    _legend(fig, lay)
    return fig


def _rows(ax: Axes, lay: Layout) -> None:
    """A row per name, top to bottom, every other one striped."""
    ax.set_ylim(len(lay.rows) - 0.5, -0.5)
    ax.set_yticks(range(len(lay.rows)),
                  labels=[_short(r, MAX_ROW_NAME) for r in lay.rows], fontsize=8)
    for k in range(1, len(lay.rows), 2):
        ax.axhspan(k - 0.5, k + 0.5, color="#f4f4f6", zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _bars(ax: Axes, lay: Layout, bars: list[Bar], width: int) -> None:
    """Each bar at its times; a bar too short to see is drawn a pixel wide; its label
    inside it where it fits."""
    per_px = lay.span / max(width - lay.left_px - 12, 1)
    for b in bars:
        left, length = b.start - lay.t0, max(b.end - b.start, per_px)
        row = lay.rows.index(b.row)
        color = lay.color(b.label)
        ax.barh(row, length, left=left, height=0.7, color=color, zorder=2, gid="bar")
        if len(b.label) * CHAR_PX + 4 <= length / per_px:
            ax.text(left + 2 * per_px, row, b.label, va="center", fontsize=7, zorder=3,
                    color=_ink_on(color))


def _ink_on(color: Any) -> str:
    """Black on a light colour, white on a dark one."""
    r, g, b = color[:3]
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 150 / 255 else "white"


def _axis(ax: Axes, lay: Layout) -> None:
    """Round ticks from the origin, and the axis's end labelled with its own time (a
    round tick too close to it loses its label)."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(0, lay.span)
    ticks = [t for t in MaxNLocator(nbins=12, steps=[1, 2, 5, 10]).tick_values(0, lay.span)
             if 0 <= t <= lay.span * (1 - END_GAP)]
    ax.set_xticks([*ticks, lay.span], labels=[*(_fmt(t) for t in ticks), f"{lay.span:.1f}s"],
                  fontsize=8)
    ax.grid(axis="x", color="#d7d7d7", zorder=1)
    ax.set_axisbelow(True)


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s" if seconds == int(seconds) else f"{seconds:.1f}s"


def _marks(ax: Axes, lay: Layout, marks: Sequence[tuple[str, float]], width: int) -> None:
    """A red line across every row at each mark's time, its name above the rows: on the
    lowest of MARK_LINES lines where it overlaps no other name."""
    from matplotlib.transforms import blended_transform_factory

    per_px = lay.span / max(width - lay.left_px - 12, 1)
    on_top = blended_transform_factory(ax.transData, ax.transAxes)
    plot_px = ROW_PX * len(lay.rows)
    ends = [-math.inf] * MARK_LINES  # where each line's last name ends, in seconds
    for name, at in sorted(marks, key=lambda m: m[1]):
        x = at - lay.t0
        span = (len(name) * CHAR_PX + 8) * per_px
        # a name that would run past the chart's right edge ends at its line instead
        flush = "right" if x + span > lay.span else "left"
        start = x - span if flush == "right" else x
        line = next((k for k in range(MARK_LINES) if ends[k] < start), MARK_LINES - 1)
        ends[line] = max(x, start + span)
        ax.axvline(x, color=MARK, linewidth=1, zorder=4)
        ax.text(x, 1 + (4 + line * MARK_PX) / plot_px, name, transform=on_top, color=MARK,
                fontsize=8, va="bottom", ha=flush, clip_on=False,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})


def _legend(fig: Figure, lay: Layout) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=lay.color(label), label=_short(label, MAX_LEGEND))
               for label in lay.labels]
    fig.legend(handles=handles, loc="lower left", ncol=lay.per_line, fontsize=8,
               frameon=False, bbox_to_anchor=(0.0, 0.0), handlelength=1.0)


def render(bars: Iterable[Any], *, fmt: str = "png", **options: Any) -> bytes:
    """``figure(bars, **options)`` as PNG (or SVG) bytes."""
    return charts.render(figure(bars, **options), fmt)


def write(path: str | os.PathLike[str], bars: Iterable[Any], **options: Any) -> Path:
    """``figure(bars, **options)`` written to ``path``, PNG or SVG by its suffix, whole
    or not at all."""
    return charts.save(figure(bars, **options), path)
