"""`clusterkit scaling`'s chart: for each node count, the measured speedup beside the
ideal (linear) one, as bars on a PNG (cli/pixels.py): 720 x 440 pixels whatever the
number of runs, labelled axes, each measured bar's value and efficiency over it, and the
legend inside the plot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusterkit.cli.pixels import GLYPH_H, Canvas, Color, text_width
from clusterkit.cli.timeline import tick_step
from clusterkit.training.scaling import Row

IDEAL, MEASURED, AXIS, GRID = (200, 200, 200), (40, 110, 200), (60, 60, 60), (230, 230, 230)
WIDTH, HEIGHT = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 48, 56  # the plot's margins: axis labels live there
SWATCH = 10


@dataclass(frozen=True)
class _Plot:
    """The plot's box in pixels and its value range (speedup 0 .. ``top``)."""

    left: int
    top: int
    right: int
    bottom: int
    most: float

    def y(self, value: float) -> int:
        return self.bottom - round((self.bottom - self.top) * value / self.most)


def png(rows: Sequence[Row], title: str) -> bytes:
    """Bars of ideal and measured speedup per node count (the smallest run is 1.0)."""
    base = rows[0].nodes if rows else 1
    ideal = [r.nodes / base for r in rows]
    highest = max([*ideal, *(r.speedup or 0 for r in rows), 1.0])
    step = tick_step(highest * 1.15, most=6)
    plot = _Plot(LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM, step * (int(highest * 1.15 / step) + 1))
    canvas = Canvas(WIDTH, HEIGHT)
    canvas.text(LEFT, 12, title, AXIS, 2)
    _axes(canvas, plot, step)
    _bars(canvas, plot, rows, ideal)
    _legend(canvas, plot)
    return canvas.png()


def _axes(canvas: Canvas, plot: _Plot, step: float) -> None:
    """Grid lines and y ticks (speedup), both axes and their names."""
    for k in range(int(plot.most / step + 1e-9) + 1):
        value = k * step
        y = plot.y(value)
        canvas.rect(plot.left, y, plot.right - plot.left, 1, GRID)
        label = f"{value:g}x"
        canvas.text(plot.left - 6 - text_width(label), y - GLYPH_H // 2, label, AXIS)
    canvas.rect(plot.left - 1, plot.top, 1, plot.bottom - plot.top + 1, AXIS)
    canvas.rect(plot.left - 1, plot.bottom, plot.right - plot.left + 1, 1, AXIS)
    canvas.text(8, plot.top - 16, "speedup", AXIS)
    name = "nodes (the first k of the cluster)"
    middle = (plot.left + plot.right) // 2
    canvas.text(middle - text_width(name) // 2, HEIGHT - 18, name, AXIS)


def _bars(canvas: Canvas, plot: _Plot, rows: Sequence[Row], ideal: Sequence[float]) -> None:
    """Per run a group of two bars centred in its slot, the node count under it and the
    measured speedup and efficiency over it."""
    if not rows:
        return
    slot = (plot.right - plot.left) / len(rows)
    bar = max(6, min(48, int(slot * 0.3)))
    for i, (row, want) in enumerate(zip(rows, ideal, strict=True)):
        middle = round(plot.left + slot * (i + 0.5))
        for x, value, color in ((middle - bar - 1, want, IDEAL),
                                (middle + 1, row.speedup or 0.0, MEASURED)):
            canvas.rect(x, plot.y(value), bar, plot.bottom - plot.y(value), color)
        _centred(canvas, middle, plot.bottom + 8, f"{row.nodes}", AXIS)
        if row.speedup is not None:
            over = f"{row.speedup:.2f}x"
            if row.efficiency is not None:
                over += f" {row.efficiency:.0f}%"
            _centred(canvas, middle + 1 + bar // 2, plot.y(row.speedup) - GLYPH_H - 4, over,
                     MEASURED, within=(plot.left, plot.right))


def _centred(canvas: Canvas, x: int, y: int, text: str, color: Color,
             within: tuple[int, int] | None = None) -> None:
    left = x - text_width(text) // 2
    if within is not None:
        left = max(within[0] + 2, min(left, within[1] - text_width(text) - 2))
    canvas.text(left, y, text, color)


def _legend(canvas: Canvas, plot: _Plot) -> None:
    """Inside the plot, top left, on white: what each colour is."""
    entries = (("ideal (linear in nodes)", IDEAL), ("measured (% of linear)", MEASURED))
    wide = SWATCH + 6 + max(text_width(text) for text, _ in entries)
    x, y = plot.left + 10, plot.top + 8
    canvas.rect(x - 6, y - 6, wide + 12, len(entries) * 16 + 8, (255, 255, 255))
    for k, (text, color) in enumerate(entries):
        canvas.rect(x, y + 16 * k, SWATCH, SWATCH, color)
        canvas.text(x + SWATCH + 6, y + 16 * k + 2, text, AXIS)
