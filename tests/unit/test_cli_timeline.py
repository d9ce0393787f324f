"""cli/timeline.py and cli/charts.py: the timeline chart has a row per row name, top to
bottom, each bar at its times in its label's one colour, the axis from the origin to the
end labelled with its own time, the marks as lines with their names; it is written as
PNG or SVG by the file's suffix, whole or not at all."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterkit.cli import charts, timeline
from clusterkit.errors import ClusterkitError, UsageError

BARS = [("stage launch", "launch", 0.0, 2.0), ("node master", "ssh", 2.0, 3.0),
        ("node worker-1", "ssh", 2.0, 4.0), ("aws i-1", "pending -> running", 0.5, 1.5)]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def drawn_bars(fig) -> list[tuple[str, float, float, tuple]]:
    """(row name, start, end, colour) of every bar, as the axes hold them."""
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    return [(names[round(p.get_y() + p.get_height() / 2)], p.get_x(),
             p.get_x() + p.get_width(), p.get_facecolor())
            for p in ax.patches if p.get_gid() == "bar"]


def test_the_chart_has_a_row_per_row_name_and_each_bar_at_its_times():
    fig = timeline.figure(BARS, width=600, title="two nodes")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "stage launch", "node master", "node worker-1", "aws i-1"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # the first row on top
    bars = drawn_bars(fig)
    assert [(row, start, end) for row, start, end, _ in bars] == [
        ("stage launch", 0.0, 2.0), ("node master", 2.0, 3.0), ("node worker-1", 2.0, 4.0),
        ("aws i-1", 0.5, 1.5)]
    colours = {row: colour for row, _, _, colour in bars}
    assert colours["node master"] == colours["node worker-1"]  # one label, one colour
    assert colours["node master"] != colours["stage launch"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "launch", "ssh", "pending -> running"]
    assert "two nodes" in [t.get_text() for t in fig.texts]


def test_the_axis_ends_where_the_title_says_the_command_ended():
    """The first bar starts 0.8 s in and the last ends at 3.5 s; the command took 4.0 s:
    the axis counts from 0 and ends at 4.0 s, labelled 4.0s at its right end; without
    origin and end it runs from the first bar's start to the last bar's end."""
    bars = [("stage key-pair", "key-pair", 0.8, 0.9), ("master", "ssh", 2.0, 3.5)]
    ax = timeline.figure(bars, title="clusterkit up c: 4.0 s", width=600, origin=0.0,
                         end=4.0).axes[0]
    assert ax.get_xlim() == (0.0, 4.0)
    labels = {round(t, 3): label.get_text()
              for t, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)}
    assert labels[4.0] == "4.0s" and labels[0.0] == "0s"
    assert all(t <= 4.0 * (1 - timeline.END_GAP) for t in labels if t != 4.0)
    default = timeline.figure(bars).axes[0]
    assert default.get_xlim() == pytest.approx((0.0, 2.7))
    assert drawn_bars(default.figure)[0][1] == 0.0  # counted from the first bar's start


def test_more_rows_make_a_taller_chart_and_a_tiny_bar_is_still_drawn():
    one = timeline.figure(BARS[:1])
    many = [(f"node {k}", "call", k, k + 0.0001) for k in range(20)]
    fig = timeline.figure(many + BARS, width=800)
    assert fig.get_size_inches()[1] * fig.dpi >= one.get_size_inches()[1] * one.dpi + 20 * (
        timeline.ROW_PX - 1)
    first = drawn_bars(fig)[0]
    assert first[0] == "node 0" and first[2] - first[1] > 0.0001  # at least a pixel wide


def test_marks_are_red_lines_with_their_names_staggered_when_close():
    fig = timeline.figure(BARS, marks=[("up done", 3.0), ("first step", 3.05)], origin=0.0)
    ax = fig.axes[0]
    lines = [line.get_xdata()[0] for line in ax.lines]
    assert lines == [3.0, 3.05]
    names = {t.get_text(): t.get_position()[1] for t in ax.texts if t.get_text() in
             ("up done", "first step")}
    assert names["first step"] > names["up done"]  # on the next line: they would overlap


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


def test_png_and_svg_by_the_suffix_whole_and_readable(tmp_path: Path):
    target = tmp_path / "up.png"
    target.write_bytes(b"old")
    assert timeline.write(target, BARS, width=1100, marks=[("up done", 3.0)]) == target
    assert png_size(target.read_bytes())[0] == 1100
    svg = timeline.write(tmp_path / "up.SVG", BARS)
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text and "node worker-1" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["up.SVG", "up.png"]
    assert target.stat().st_mode & 0o777 == 0o644
    with pytest.raises(UsageError, match=r"must end in \.png or \.svg"):
        timeline.write(tmp_path / "up.pdf", BARS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["up.SVG", "up.png"]


def test_without_matplotlib_a_chart_names_the_extra(monkeypatch):
    monkeypatch.setattr(charts, "available", lambda: False)
    with pytest.raises(ClusterkitError, match="needs matplotlib") as info:
        timeline.figure(BARS)
    assert "clusterkit[charts]" in (info.value.hint or "")
