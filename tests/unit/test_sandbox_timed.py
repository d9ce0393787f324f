"""sandbox.timed without a server: a request's operation is read from each protocol's
place (its body stays readable), and the timed app holds a call back by its round trip
without spending CPU on it, recording each call; a state held for a wait is released by a
timer (no CPU either) and recorded; the models know which API call a thread serves."""

from __future__ import annotations

import io
import threading

from clusterkit_sandbox.timed import (
    Recorder,
    hold,
    operation_of,
    read_timeline,
    serving,
    serving_call,
    timed_app,
)
from clusterkit_sandbox.timings import ROUND_TRIPS, WAITS, Timings, Wait


def _environ(body: bytes = b"", query: str = "", ctype: str = "", **extra: str) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "QUERY_STRING": query,
            "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": ctype,
            "wsgi.input": io.BytesIO(body), **extra}


def test_operation_of_each_protocol():
    form = b"Action=RunInstances&Version=2016-11-15&MinCount=2"
    op, env = operation_of(_environ(form, ctype="application/x-www-form-urlencoded"))
    assert op == "RunInstances" and env["wsgi.input"].read() == form  # body intact
    assert operation_of(_environ(query="Action=DescribeStacks"))[0] == "DescribeStacks"
    json_call = _environ(b"{}", ctype="application/x-amz-json-1.1",
                         HTTP_X_AMZ_TARGET="AWSPriceListService.GetProducts")
    assert operation_of(json_call)[0] == "GetProducts"
    block = _environ(b"\x00" * 1024, ctype="application/octet-stream",
                     PATH_INFO="/snapshots/snap-1/blocks/0")
    op, env = operation_of(block)
    assert op == "Write /snapshots/snap-1/blocks/0" and env["wsgi.input"].read(4) == b"\0" * 4
    get = {**_environ(), "REQUEST_METHOD": "GET", "PATH_INFO": "/2015-02-01/file-systems"}
    assert operation_of(get)[0] == "Describe /2015-02-01/file-systems"


def test_a_call_is_held_back_by_its_round_trip_then_answered_and_recorded(tmp_path):
    """The wait is a sleep (no CPU) of the call family's scaled figure, before moto
    answers; the clock is injected: order and outcome, not seconds."""
    timings = Timings(0.5)
    recorder = Recorder(tmp_path / "timeline.jsonl")
    order: list[object] = []

    def app(environ, start_response):
        order.append("answered")
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = timed_app(app, timings, recorder, sleep=order.append)
    body = wrapped(_environ(query="Action=RunInstances"), lambda *a: None)
    assert body == [b"ok"]
    assert order == [0.5 * ROUND_TRIPS["run_instances"].seconds, "answered"]
    (line,) = read_timeline(tmp_path / "timeline.jsonl")
    assert line["kind"] == "call" and line["what"] == "RunInstances"
    assert line["end"] >= line["start"]
    untimed = timed_app(app, Timings(), recorder, sleep=order.append)
    untimed(_environ(query="Action=RunInstances"), lambda *a: None)
    assert order[-2:] == [0.0, "answered"]  # the untimed sandbox holds nothing back


class _Timer:
    """threading.Timer's shape; fires only when the test says (the injected clock)."""

    made: list[_Timer] = []

    def __init__(self, seconds, fire):
        self.seconds, self.fire, self.daemon, self.started = seconds, fire, False, False
        _Timer.made.append(self)

    def start(self):
        self.started = True


def test_a_held_state_is_released_by_a_timer_and_recorded(tmp_path):
    recorder = Recorder(tmp_path / "timeline.jsonl")
    seconds = Timings(0.002).wait(Wait.SNAPSHOT_COMPLETE)
    released: list[str] = []

    def release() -> bool:
        released.append("snap-1")
        return True

    _Timer.made.clear()
    hold(Wait.SNAPSHOT_COMPLETE, "snap-1", seconds, release, recorder, timer_of=_Timer)
    (timer,) = _Timer.made
    assert timer.seconds == 0.002 * WAITS[Wait.SNAPSHOT_COMPLETE].seconds
    assert timer.started and timer.daemon and released == []  # held now, no thread busy
    assert read_timeline(tmp_path / "timeline.jsonl") == []
    timer.fire()
    assert released == ["snap-1"]
    (line,) = read_timeline(tmp_path / "timeline.jsonl")
    assert (line["kind"], line["what"], line["resource"]) == (
        "wait", Wait.SNAPSHOT_COMPLETE.value, "snap-1")
    assert line["end"] >= line["start"]


def test_a_release_that_changed_nothing_records_nothing(tmp_path):
    recorder = Recorder(tmp_path / "timeline.jsonl")
    timers: list[threading.Timer] = []
    releases: list[str] = []

    def timer_of(seconds: float, fire) -> threading.Timer:
        timers.append(threading.Timer(seconds, fire))
        return timers[-1]

    hold(Wait.VOLUME_ATTACH, "vol-1", 0.01, lambda: releases.append("vol-1") and False,
         recorder, timer_of=timer_of)
    (timer,) = timers
    timer.join(10)  # the whole of done(): the release and whatever it would record
    assert not timer.is_alive() and releases == ["vol-1"]
    assert read_timeline(tmp_path / "timeline.jsonl") == []


def test_the_models_know_the_call_a_thread_serves():
    seen: list[str | None] = []
    assert serving() is None
    with serving_call("CreateVolume"):
        seen.append(serving())
        other = threading.Thread(target=lambda: seen.append(serving()))
        other.start()
        other.join()
    assert seen == ["CreateVolume", None] and serving() is None
