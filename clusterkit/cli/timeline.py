"""A timeline chart as a PNG: one row per node, AWS resource or stage, a bar per stage
or wait, so a reader sees at a glance what overlapped and what waited in series
(bench/bench_first_step.py's charts; `clusterkit up --timeline FILE.png` to come).

The input is a list of bars ``(row, label, start, end)``: a tuple, a ``Bar`` or any
object with those four attributes. Rows are drawn in the order they first appear; a
label has one colour wherever it appears, and the legend names it. Times are seconds
on any one clock (wall-clock or since the command started): the axis counts from the
earliest bar (or ``origin``) to the latest bar's end (or ``end``), and that end is
labelled with its own time (``4.3s``), as a title that gives the command's duration."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from clusterkit.cli.pixels import GLYPH_H, Canvas, Color, text_width

MARGIN, ROW_H, BAR_H, LEGEND_H = 10, 14, 10, 14
MAX_ROW_NAME, MAX_LEGEND = 44, 40  # characters of a row's name, of a legend entry shown
MARK_LINES, MARK_H = 3, GLYPH_H + 3  # lines for the marks' names, staggered when close
PALETTE: tuple[Color, ...] = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
    (57, 59, 121), (173, 73, 74), (174, 199, 232), (255, 187, 120), (152, 223, 138),
    (255, 152, 150), (197, 176, 213), (196, 156, 148), (247, 182, 210), (219, 219, 141),
)
INK, GRID, STRIPE, MARK = (20, 20, 20), (215, 215, 215), (244, 244, 246), (200, 0, 0)


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


def tick_step(span: float, most: int = 12) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving at most ``most`` ticks."""
    if span <= 0:
        return 1.0
    rough = span / most
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough)


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s" if seconds == int(seconds) else f"{seconds:.1f}s"


def _short(name: str) -> str:
    return name if len(name) <= MAX_ROW_NAME else name[:MAX_ROW_NAME - 1] + "~"


class _Layout:
    """Where everything goes: rows, the plot's x range, the time scale, the legend."""

    def __init__(self, bars: list[Bar], width: int, title: str, origin: float | None,
                 marks: int = 0, end: float | None = None) -> None:
        self.rows = list(dict.fromkeys(b.row for b in bars))
        self.labels = list(dict.fromkeys(b.label for b in bars))
        self.t0 = origin if origin is not None else min(b.start for b in bars)
        last = max(b.end for b in bars) if end is None else end
        self.span = max(last - self.t0, 1e-9)
        self.left = MARGIN + max(text_width(_short(r)) for r in self.rows) + 8
        self.right = width - MARGIN
        self.top = (MARGIN + (2 * GLYPH_H + 10 if title else 0)
                    + (MARK_LINES * MARK_H + 4 if marks else 4))
        self.axis_y = self.top + ROW_H * len(self.rows)
        longest = min(max(len(label) for label in self.labels), MAX_LEGEND)
        self.column = 14 + text_width("x" * longest) + 12  # a legend entry's width
        self.per_line = max(1, (width - 2 * MARGIN) // self.column)
        self.legend_y = self.axis_y + 22
        self.height = (self.legend_y + LEGEND_H * math.ceil(len(self.labels) / self.per_line)
                       + MARGIN)

    def x(self, t: float) -> int:
        return self.left + round((t - self.t0) / self.span * (self.right - self.left))

    def color(self, label: str) -> Color:
        return PALETTE[self.labels.index(label) % len(PALETTE)]


def _frame(c: Canvas, lay: _Layout, title: str) -> None:
    """Title, row stripes and names, the time grid and its labels."""
    if title:
        c.text(MARGIN, MARGIN, title, INK, scale=2)
    for k, row in enumerate(lay.rows):
        y = lay.top + k * ROW_H
        if k % 2:
            c.rect(lay.left, y, lay.right - lay.left, ROW_H, STRIPE)
        c.text(MARGIN, y + (ROW_H - GLYPH_H) // 2, _short(row), INK)
    _ticks(c, lay)
    c.rect(lay.left, lay.axis_y, lay.right - lay.left, 1, INK)


def _ticks(c: Canvas, lay: _Layout) -> None:
    """Round ticks, and the axis's end labelled with its own time (a round tick too
    close to it loses its label)."""
    step = tick_step(lay.span)
    end_label = _fmt_end(lay.span)
    end_left = lay.right - text_width(end_label)
    for n in range(int(lay.span / step + 1e-9) + 1):
        x = lay.x(lay.t0 + n * step)
        c.rect(x, lay.top, 1, lay.axis_y - lay.top, GRID)
        label = _fmt(n * step)
        left = x - text_width(label) // 2
        if left + text_width(label) + 4 <= end_left:
            c.text(left, lay.axis_y + 4, label, INK)
    c.rect(lay.right - 1, lay.top, 1, lay.axis_y - lay.top, GRID)
    c.text(end_left, lay.axis_y + 4, end_label, INK)


def _fmt_end(seconds: float) -> str:
    """The axis's end as a title says a duration: one decimal (``4.0s``)."""
    return f"{seconds:.1f}s"


def _bars(c: Canvas, lay: _Layout, bars: list[Bar]) -> None:
    for b in bars:
        x0, x1 = lay.x(b.start), lay.x(max(b.end, b.start))
        y = lay.top + lay.rows.index(b.row) * ROW_H + (ROW_H - BAR_H) // 2
        c.rect(x0, y, max(x1 - x0, 1), BAR_H, lay.color(b.label))
        if text_width(b.label) + 4 <= x1 - x0:
            c.text(x0 + 2, y + (BAR_H - GLYPH_H) // 2, b.label, _ink_on(lay.color(b.label)))


def _ink_on(color: Color) -> Color:
    """Black on a light colour, white on a dark one."""
    r, g, b = color
    return INK if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (255, 255, 255)


def _marks(c: Canvas, lay: _Layout, marks: Sequence[tuple[str, float]]) -> None:
    """A red line across every row at each mark's time, its name above the rows: on the
    lowest of MARK_LINES lines where it overlaps no other name."""
    taken: list[list[tuple[int, int]]] = [[] for _ in range(MARK_LINES)]
    names = []
    for name, at in sorted(marks, key=lambda m: m[1]):
        x = lay.x(at)
        left = max(min(x + 2, lay.right - text_width(name)), MARGIN)
        span = (left - 2, left + text_width(name) + 1)
        line = next((k for k, used in enumerate(taken)
                     if all(span[1] <= a or b <= span[0] for a, b in used)), MARK_LINES - 1)
        taken[line].append(span)
        y = lay.top - 4 - (line + 1) * MARK_H
        c.rect(x, y, 1, lay.axis_y - y, MARK)
        names.append((span, y, left, name))
    for (a, b), y, left, name in names:  # over the lines: a name stays readable
        c.rect(a, y - 1, b - a, GLYPH_H + 2, (255, 255, 255))
        c.text(left, y, name, MARK)


def _legend(c: Canvas, lay: _Layout) -> None:
    for k, label in enumerate(lay.labels):
        x = MARGIN + (k % lay.per_line) * lay.column
        y = lay.legend_y + (k // lay.per_line) * LEGEND_H
        c.rect(x, y, 10, 10, lay.color(label))
        c.text(x + 14, y + 2, label if len(label) <= MAX_LEGEND
               else label[:MAX_LEGEND - 1] + "~", INK)


def render(bars: Iterable[Any], *, title: str = "", width: int = 1100,
           marks: Sequence[tuple[str, float]] = (), origin: float | None = None,
           end: float | None = None) -> bytes:
    """The chart as PNG bytes. ``marks``: (name, time) drawn as vertical lines (the end
    of `up`, the first step); ``origin``: the time the axis counts from; ``end``: the
    time it ends at (the command's end)."""
    items = [as_bar(b) for b in bars]
    if not items:
        raise ValueError("a timeline needs at least one bar")
    lay = _Layout(items, width, title, origin, len(marks), end)
    canvas = Canvas(width, lay.height)
    _frame(canvas, lay, title)
    _bars(canvas, lay, items)
    _marks(canvas, lay, marks)
    _legend(canvas, lay)
    return canvas.png()


def write(path: str | os.PathLike[str], bars: Iterable[Any], **options: Any) -> Path:
    """``render(bars, **options)`` written to ``path`` whole or not at all (a temp file
    renamed into place)."""
    target = Path(path)
    data = render(bars, **options)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a chart from its readers
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
