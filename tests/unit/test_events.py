"""Progress as events (clusterkit.events): what the orchestration and pack report, and how
cli.events.ConsoleReporter shows it (plain lines indented by level, markup never
interpreted, a bar for a stage with a total that is closed even when the command fails)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clusterkit.cli.events import ConsoleReporter
from clusterkit.cluster.runtime import Runtime
from clusterkit.dataset.codec import CodecOptions
from clusterkit.dataset.listing import ListOptions
from clusterkit.dataset.packer import PackOptions, do_pack
from clusterkit.events import Collect, Event, Kind, Stage
from tests.unit.dataset_images import photo, write_image


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=60, color_system=None), out


def test_runtime_reports_typed_events():
    seen = Collect()
    rt = Runtime(session=None, report=seen)
    rt.started(Stage.STACK, "creating stack s")
    rt.emit(Kind.PROGRESS, "i-1 reachable", stage=Stage.SSH, node="i-1", done=1, total=2,
            level=1)
    rt.warn("no offers from eu-west-1: denied")
    rt.error("failed: boom", level=1, stage=Stage.LAUNCH)
    rt.done(Stage.UP, "cluster c is up")
    rt.info("note")
    assert [e.kind for e in seen.events] == [Kind.STAGE_STARTED, Kind.PROGRESS, Kind.WARNING,
                                             Kind.ERROR, Kind.STAGE_DONE, Kind.INFO]
    assert seen.events[1] == Event(Kind.PROGRESS, "i-1 reachable", stage=Stage.SSH,
                                   node="i-1", done=1, total=2, level=1)
    assert seen.texts(Kind.WARNING) == ["no offers from eu-west-1: denied"]


def test_default_runtime_reports_nowhere(capsys: pytest.CaptureFixture[str]):
    Runtime(session=None).warn("dropped")  # the null reporter: no output, no error
    assert capsys.readouterr() == ("", "")


def test_lines_are_plain_indented_and_never_wrapped():
    console, out = _console()
    report = ConsoleReporter(console)
    report(Event(Kind.STAGE_STARTED, "deleting cluster c in us-east-1", stage=Stage.DOWN))
    report(Event(Kind.PROGRESS, "deleted volume [red]vol-1[/red]", stage=Stage.DOWN, level=1))
    long = "skipped /a/very/long/path/" + "x" * 80 + ".jpg: cannot decode"
    report(Event(Kind.WARNING, long))
    assert out.getvalue().splitlines() == ["deleting cluster c in us-east-1",
                                           "  deleted volume [red]vol-1[/red]", long]


def test_a_stage_with_a_total_is_a_bar_closed_by_its_done_event():
    console, out = _console()
    with ConsoleReporter(console, unit="images", live=True) as report:
        report(Event(Kind.STAGE_STARTED, "train.lst", stage=Stage.PACK, total=4))
        assert report._bar is not None
        for done in range(1, 5):
            report(Event(Kind.PROGRESS, "train.lst", stage=Stage.PACK, done=done, total=4))
        report(Event(Kind.STAGE_DONE, "train.rec: 4 images", stage=Stage.PACK))
        assert report._bar is None
    text = out.getvalue()
    assert "4/4" in text and "images/s" in text
    assert text.rstrip().endswith("train.rec: 4 images")


def test_piped_a_counted_stage_is_its_start_and_done_lines_and_no_bar():
    console, out = _console()  # a file, not a terminal
    with ConsoleReporter(console, unit="images") as report:
        report(Event(Kind.STAGE_STARTED, "train.lst", stage=Stage.PACK, total=4))
        assert report._bar is None
        for done in range(1, 5):
            report(Event(Kind.PROGRESS, "train.lst", stage=Stage.PACK, done=done, total=4))
        report(Event(Kind.WARNING, "skipped a.jpg: cannot decode", stage=Stage.PACK))
        report(Event(Kind.STAGE_DONE, "train.rec: 4 images", stage=Stage.PACK))
        report(Event(Kind.PROGRESS, "deleted volume vol-1", stage=Stage.DOWN, level=1))
    assert out.getvalue().splitlines() == ["train.lst", "skipped a.jpg: cannot decode",
                                           "train.rec: 4 images", "  deleted volume vol-1"]
    assert "━" not in out.getvalue() and "images/s" not in out.getvalue()


def test_a_failing_command_closes_its_bar():
    console, _ = _console()
    with pytest.raises(RuntimeError), ConsoleReporter(console) as report:
        report(Event(Kind.STAGE_STARTED, "train.lst", stage=Stage.PACK, total=10))
        raise RuntimeError("disk full")
    assert report._bar is None


def _ssh_wait(report: ConsoleReporter) -> None:
    """The SSH wait of a 2-node `up`, as cluster/provision/up.py reports it."""
    report(Event(Kind.STAGE_STARTED, "waiting for SSH on 2 node(s)", stage=Stage.SSH))
    report(Event(Kind.PROGRESS, "waiting for SSH: 0/2 ready, 0s elapsed", stage=Stage.SSH,
                 done=0, total=2, level=1))
    report(Event(Kind.PROGRESS, "i-1 reachable at 10.0.0.1 (1/2 ready, 3s)", stage=Stage.SSH,
                 node="i-1", done=1, total=2, level=1))
    report(Event(Kind.PROGRESS, "waiting for SSH: 1/2 ready, 10s elapsed", stage=Stage.SSH,
                 done=1, total=2, level=1))


def test_on_a_terminal_a_wait_is_a_live_bar_and_leaves_its_lines():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    with ConsoleReporter(console) as report:
        _ssh_wait(report)
        assert report._bar is not None and report._stage is Stage.SSH
        task = report._bar.tasks[0]
        assert (task.description, task.completed, task.total) == ("ssh", 1, 2)
        report(Event(Kind.STAGE_DONE, "SSH answers on 2 node(s)", stage=Stage.SSH))
        assert report._bar is None  # gone with its stage
        report(Event(Kind.STAGE_STARTED, "bootstrapping 2 node(s)", stage=Stage.BOOTSTRAP))
        assert report._bar is not None and report._bar.tasks[0].total is None  # a spinner
    assert report._bar is None
    text = out.getvalue()
    for line in ("waiting for SSH on 2 node(s)", "i-1 reachable at 10.0.0.1 (1/2 ready, 3s)",
                 "SSH answers on 2 node(s)", "bootstrapping 2 node(s)"):
        assert line in text
    assert "waiting for SSH: 1/2 ready" not in text  # the bar said it


def test_piped_output_has_every_line_and_no_bar():
    console, out = _console()  # not a terminal: CI logs, pipes, tests
    report = ConsoleReporter(console)
    _ssh_wait(report)
    assert report._bar is None
    report(Event(Kind.STAGE_DONE, "SSH answers on 2 node(s)", stage=Stage.SSH))
    assert out.getvalue().splitlines() == [
        "waiting for SSH on 2 node(s)", "  waiting for SSH: 0/2 ready, 0s elapsed",
        "  i-1 reachable at 10.0.0.1 (1/2 ready, 3s)", "  waiting for SSH: 1/2 ready, 10s elapsed",
        "SSH answers on 2 node(s)"]


def test_pack_reports_each_list_its_progress_and_skipped_items(tmp_path: Path):
    images = tmp_path / "img"
    images.mkdir()
    for seed, name in enumerate(("a", "b", "c")):
        write_image(str(images / f"{name}.jpg"), photo(8, 8, seed))
    prefix = str(tmp_path / "out")
    lists = Collect()
    do_pack(PackOptions(prefix, str(images), make_list=True,
                        lists=ListOptions(shuffle=False)), lists)
    assert lists.texts(Kind.INFO) == [f"wrote {prefix}.lst (3 images)"]
    with open(f"{prefix}.lst", "a") as lst:
        lst.write("9\t0.000000\tmissing.jpg\n")  # a listed file that is not there
    seen = Collect()
    do_pack(PackOptions(prefix, str(images), codec=CodecOptions(pass_through=True)), seen)
    started = [e for e in seen.events if e.kind is Kind.STAGE_STARTED]
    assert [(e.text, e.stage, e.total) for e in started] == [("out.lst", Stage.PACK, 4)]
    progress = [e.done for e in seen.events if e.kind is Kind.PROGRESS]
    assert progress == [1, 2, 3, 4]
    (skipped,) = seen.texts(Kind.WARNING)
    assert skipped.startswith(f"skipped {images / 'missing.jpg'}: ")
    (done,) = seen.texts(Kind.STAGE_DONE)
    assert done.startswith(f"{prefix}.rec: 3 images in ") and done.endswith(", 1 skipped")
    assert seen.texts(Kind.INFO) == ["1 bad file skipped in total"]
