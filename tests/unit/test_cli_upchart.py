"""cli/upchart.py: the chart of the last `up` as `up --timeline` and `status
--timeline` draw it: its axis runs from the command's start to the end its title says,
its node rows are master / worker-N, and a file name it cannot write as a PNG or SVG is
refused (exit 2) before anything runs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from clusterkit.cli import charts, timeline, upchart
from clusterkit.cli.main import cli
from clusterkit.cluster.ops import uprecord
from clusterkit.events import Collect, Event, Kind, Stage
from clusterkit.timeline.uptimeline import Mark


def test_the_axis_ends_where_the_title_says_the_command_ended():
    """The first bar starts 0.8 s in and the last ends at 3.5 s; the command took 4.0 s:
    the axis counts from 0 and ends at 4.0 s, labelled 4.0s at its right end."""
    bars = [("stage key-pair", "key-pair", 0.8, 0.9), ("master", "ssh", 2.0, 3.5)]
    ax = timeline.figure(bars, title="clusterkit up c: 4.0 s", width=600, origin=0.0,
                         end=4.0).axes[0]
    assert ax.get_xlim() == (0.0, 4.0)
    assert ax.get_xticklabels()[-1].get_text() == "4.0s" and ax.get_xticks()[-1] == 4.0


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
                                   "{dir}/up.pdf"],
                                  ["status", "c1", "--timeline", "{dir}/noext"]])
def test_a_suffix_the_chart_cannot_be_written_as_is_refused(argv, tmp_path):
    result = CliRunner().invoke(cli, [a.format(dir=tmp_path) for a in argv])
    assert result.exit_code == 2, result.output
    assert "must end in .png or .svg" in result.output and "--timeline" in result.output
    assert list(tmp_path.iterdir()) == []


def test_png_and_svg_in_any_case_are_accepted(tmp_path):
    for name in ("UP.PNG", "up.png", "up.svg", "Up.Svg"):
        upchart.check_path(str(tmp_path / name))


def test_without_matplotlib_the_option_names_the_extra_before_anything_runs(
        tmp_path, monkeypatch):
    """Exit 1 (not a usage error: the command is right, the machine lacks the extra),
    before `up` makes any call."""
    monkeypatch.setattr(charts, "available", lambda: False)
    result = CliRunner().invoke(cli, ["status", "c1", "--timeline", str(tmp_path / "up.png")])
    assert result.exit_code == 1, result.output
    assert "needs matplotlib" in result.output and "clusterkit[charts]" in result.output
