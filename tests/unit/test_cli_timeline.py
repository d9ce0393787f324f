"""cli/timeline.py and cli/pixels.py: the timeline chart is a valid PNG of the size its
rows need, with each bar where its times put it, and is written whole or not at all."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterkit.cli import timeline
from clusterkit.cli.pixels import GLYPHS, Canvas

BARS = [("stage launch", "launch", 0.0, 2.0), ("node master", "ssh", 2.0, 3.0),
        ("node worker-1", "ssh", 2.0, 4.0), ("aws i-1", "pending -> running", 0.5, 1.5)]


def decode(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB rows of a PNG this package wrote, every chunk's CRC
    checked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(png):
        (size,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + size]
        (crc,) = struct.unpack(">I", png[pos + 8 + size:pos + 12 + size])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF, kind
        chunks[kind] = chunks.get(kind, b"") + data
        pos += 12 + size
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, color, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color) == (8, 2)  # 8-bit RGB
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 3 * width
    assert len(raw) == height * stride
    rows = [raw[r * stride:(r + 1) * stride] for r in range(height)]
    assert all(row[0] == 0 for row in rows)  # filter type none
    return width, height, [row[1:] for row in rows]


def pixel(rows: list[bytes], x: int, y: int) -> tuple[int, int, int]:
    return tuple(rows[y][3 * x:3 * x + 3])  # type: ignore[return-value]


def test_a_canvas_is_a_valid_png_of_its_size_with_what_was_drawn():
    canvas = Canvas(7, 3)
    canvas.rect(2, 1, 3, 5, (255, 0, 0))  # cut off at the bottom edge
    width, height, rows = decode(canvas.png())
    assert (width, height) == (7, 3)
    assert pixel(rows, 2, 1) == pixel(rows, 4, 2) == (255, 0, 0)
    assert pixel(rows, 1, 1) == pixel(rows, 2, 0) == pixel(rows, 5, 1) == (255, 255, 255)


def test_text_draws_the_glyph_columns_and_an_unknown_character_as_a_question_mark():
    a, b = Canvas(12, 7), Canvas(12, 7)
    assert a.text(0, 0, "é") == 6
    b.text(0, 0, "?")
    assert a.pixels == b.pixels
    assert len(GLYPHS) == 95 and GLYPHS["!"] == bytes.fromhex("00005f0000")


def test_the_chart_has_a_row_per_row_name_and_each_bar_at_its_times():
    png = timeline.render(BARS, width=600, title="two nodes")
    width, height, rows = decode(png)
    lay = timeline._Layout([timeline.as_bar(b) for b in BARS], 600, "two nodes", None)
    assert width == 600 and height == lay.height
    assert lay.rows == ["stage launch", "node master", "node worker-1", "aws i-1"]
    mid = timeline.ROW_H // 2
    ssh = lay.color("ssh")
    for k, row in ((1, "node master"), (2, "node worker-1")):
        y = lay.top + k * timeline.ROW_H + mid
        assert lay.rows[k] == row
        assert pixel(rows, lay.x(2.0) + 1, y) == ssh  # one label, one colour
    y = lay.top + 1 * timeline.ROW_H + mid
    assert pixel(rows, lay.x(3.5), y) != ssh  # the master's SSH bar ended at 3 s
    y = lay.top + 2 * timeline.ROW_H + mid
    assert pixel(rows, lay.x(3.5), y) == ssh  # the worker's did not
    assert lay.x(0.0) == lay.left and lay.x(4.0) == lay.right


def test_more_rows_make_a_taller_chart_and_a_tiny_bar_is_still_drawn():
    one = decode(timeline.render(BARS[:1]))[1]
    many = [(f"node {k}", "call", k, k + 0.0001) for k in range(20)]
    width, height, rows = decode(timeline.render(many + BARS, width=800))
    assert height > one + 20 * timeline.ROW_H - 1
    lay = timeline._Layout([timeline.as_bar(b) for b in many + BARS], 800, "", None)
    y = lay.top + timeline.ROW_H // 2
    assert pixel(rows, lay.x(0.0), y) == lay.color("call")


@dataclass(frozen=True)
class OtherBar:  # plan/uptimeline.Bar's shape: any object with the four attributes
    row: str
    label: str
    start: float
    end: float


def test_bars_may_be_tuples_named_tuples_or_objects_and_none_is_refused():
    assert timeline.as_bar(OtherBar("r", "l", 1, 2)) == timeline.Bar("r", "l", 1.0, 2.0)
    assert timeline.as_bar(timeline.Bar("r", "l", 1, 2)) == ("r", "l", 1.0, 2.0)
    with pytest.raises(ValueError, match="at least one bar"):
        timeline.render([])


@pytest.mark.parametrize(("span", "step"), [(8.1, 1.0), (0.4, 0.05), (61, 10), (130, 20),
                                            (0, 1.0)])
def test_ticks_are_round_and_at_most_twelve(span: float, step: float):
    assert timeline.tick_step(span) == pytest.approx(step)


def test_write_replaces_the_file_whole_and_leaves_no_temp(tmp_path: Path):
    target = tmp_path / "up.png"
    target.write_bytes(b"old")
    assert timeline.write(target, BARS, marks=[("up done", 3.0)]) == target
    assert decode(target.read_bytes())[0] == 1100
    assert [p.name for p in tmp_path.iterdir()] == ["up.png"]
    assert target.stat().st_mode & 0o777 == 0o644
    with pytest.raises(ValueError):
        timeline.write(target, [])
    assert decode(target.read_bytes())[0] == 1100  # the old chart stays
