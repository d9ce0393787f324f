"""`clusterkit scaling`'s chart: for each node count, the measured speedup beside the
ideal (linear) one, as bars on a PNG (cli/pixels.py)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.cli.pixels import GLYPH_H, Canvas, text_width
from clusterkit.training.scaling import Row

IDEAL, MEASURED, AXIS = (200, 200, 200), (40, 110, 200), (60, 60, 60)
BAR, GAP, LEFT, TOP, HEIGHT = 18, 24, 48, 40, 220


def png(rows: Sequence[Row], title: str) -> bytes:
    """Bars of ideal and measured speedup per node count (the smallest run is 1.0)."""
    base = rows[0].nodes if rows else 1
    ideal = [r.nodes / base for r in rows]
    top_value = max([*ideal, *(r.speedup or 0 for r in rows), 1.0])
    width = LEFT + len(rows) * (2 * BAR + GAP) + GAP
    canvas = Canvas(max(width, text_width(title, 2) + 2 * LEFT), TOP + HEIGHT + 40)
    canvas.text(LEFT, 10, title, AXIS, 2)
    floor = TOP + HEIGHT
    canvas.rect(LEFT - 2, TOP, 1, HEIGHT, AXIS)
    canvas.rect(LEFT - 2, floor, width - LEFT, 1, AXIS)
    for tick in range(int(top_value) + 1):
        y = floor - int(HEIGHT * tick / top_value)
        canvas.text(LEFT - 8 - text_width(str(tick)), y - GLYPH_H // 2, str(tick), AXIS)
    for i, (row, want) in enumerate(zip(rows, ideal, strict=True)):
        x = LEFT + GAP // 2 + i * (2 * BAR + GAP)
        for offset, value, color in ((0, want, IDEAL), (BAR, row.speedup or 0.0, MEASURED)):
            tall = int(HEIGHT * value / top_value)
            canvas.rect(x + offset, floor - tall, BAR - 2, tall, color)
        canvas.text(x, floor + 8, f"{row.nodes}n", AXIS)
    canvas.text(LEFT, floor + 24, "grey: ideal  blue: measured speedup", AXIS)
    return canvas.png()
