"""cli/upchart.py: the chart of the last `up` as `up --timeline` and `status
--timeline` draw it: its axis runs from the command's start to the end its title says,
its node rows are master / worker-N, and a file name it cannot write as a PNG is refused
(exit 2) before anything runs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from clusterkit.cli import timeline, upchart
from clusterkit.cli.main import cli
from clusterkit.cli.pixels import GLYPH_H, Canvas, text_width
from clusterkit.cluster.ops import uprecord
from clusterkit.events import Collect, Event, Kind, Stage
from clusterkit.plan.uptimeline import Mark
from tests.unit.test_cli_timeline import decode


def drawn_at(png: bytes, x: int, y: int, text: str) -> bool:
    """Whether ``text`` is drawn (ink colour) with its top left at (x, y) of ``png``."""
    width, _, rows = decode(png)
    want = Canvas(width, y + GLYPH_H + 1)
    want.text(x, y, text, timeline.INK)
    stride = 3 * width
    for r in range(y, y + GLYPH_H):
        line = want.pixels[r * stride:(r + 1) * stride]
        for px in range(x, x + text_width(text)):
            if line[3 * px:3 * px + 3] == bytes(timeline.INK) and \
                    rows[r][3 * px:3 * px + 3] != bytes(timeline.INK):
                return False
    return True


def test_the_axis_ends_where_the_title_says_the_command_ended():
    """The first bar starts 0.8 s in and the last ends at 3.5 s; the command took 4.0 s:
    the axis counts from 0 and ends at 4.0 s, labelled 4.0s under its right end."""
    bars = [("stage key-pair", "key-pair", 0.8, 0.9), ("master", "ssh", 2.0, 3.5)]
    png = timeline.render(bars, title="clusterkit up c: 4.0 s", width=600, origin=0.0,
                          end=4.0)
    lay = timeline._Layout([timeline.as_bar(b) for b in bars], 600, "t", 0.0, end=4.0)
    assert lay.x(0.0) == lay.left and lay.x(4.0) == lay.right
    assert drawn_at(png, lay.right - text_width("4.0s"), lay.axis_y + 4, "4.0s")
    default = timeline._Layout([timeline.as_bar(b) for b in bars], 600, "t", None)
    assert default.x(0.8) == default.left and default.x(3.5) == default.right  # as before


def test_up_charts_rows_by_role_from_0_to_the_recorded_end(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    ticks = iter([0.0, 0.8, 2.0, 2.6, 2.9, 4.0])
    rec = uprecord.Recording(Collect(), clock=lambda: next(ticks))
    rec(Event(Kind.STAGE_STARTED, "key pair", stage=Stage.KEY_PAIR))
    rec(Event(Kind.STAGE_STARTED, "waiting for SSH", stage=Stage.SSH))
    rec.names = {"i-0aa": "master", "i-0bb": "worker-1"}
    rec(Event(Kind.PROGRESS, "i-0bb reachable", stage=Stage.SSH, node="i-0bb"))
    rec(Event(Kind.PROGRESS, "i-0aa reachable", stage=Stage.SSH, node="i-0aa"))
    uprecord.save("chart-c", rec, ok=True)
    seen: dict = {}
    monkeypatch.setattr(timeline, "write", lambda path, bars, **kw: seen.update(
        bars=list(bars), **kw) or Path(path))
    upchart.draw(Console(file=io.StringIO()), "chart-c", str(tmp_path / "up.png"))
    assert [b.row for b in seen["bars"]] == ["stage key-pair", "stage ssh", "master",
                                             "worker-1"]
    assert seen["origin"] == 0.0 and seen["end"] == 4.0
    assert seen["title"] == "clusterkit up chart-c: 4.0 s"
    assert Mark(2.0, "stage-started", "ssh") in rec.marks


@pytest.mark.parametrize("argv", [["status", "c1", "--timeline", "{dir}/x.txt"],
                                  ["up", "{dir}/c1.yaml", "--yes", "--timeline",
                                   "{dir}/up.svg"],
                                  ["status", "c1", "--timeline", "{dir}/noext"]])
def test_a_suffix_the_chart_cannot_be_written_as_is_refused(argv, tmp_path):
    result = CliRunner().invoke(cli, [a.format(dir=tmp_path) for a in argv])
    assert result.exit_code == 2, result.output
    assert "must end in .png" in result.output and "--timeline" in result.output
    assert list(tmp_path.iterdir()) == []


def test_png_in_any_case_is_accepted(tmp_path):
    upchart.check_path(str(tmp_path / "UP.PNG"))
    upchart.check_path(str(tmp_path / "up.png"))
