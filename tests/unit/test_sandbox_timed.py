"""sandbox.timed without a server: a request's operation is read from each protocol's
place (its body stays readable), and the timed app holds a call back by its round trip
without spending CPU on it, recording each call; a state held for a wait is released by a
timer (no CPU either) and recorded; the models know which API call a thread serves."""

from __future__ import annotations

import io
import threading
import time

from clusterkit.sandbox.timed import (
    Recorder,
    hold,
    operation_of,
    read_timeline,
    serving,
    serving_call,
    timed_app,
)
from clusterkit.sandbox.timings import ROUND_TRIPS, WAITS, Timings, Wait


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


def test_a_call_is_held_back_by_its_round_trip_at_no_cpu_and_recorded(tmp_path):
    scale = 0.5
    timings = Timings(scale)
    recorder = Recorder(tmp_path / "timeline.jsonl")

    def app(environ, start_response):
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = timed_app(app, timings, recorder)
    wall, cpu = time.perf_counter(), time.process_time()
    body = wrapped(_environ(query="Action=RunInstances"), lambda *a: None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    held = scale * ROUND_TRIPS["run_instances"].seconds
    assert body == [b"ok"] and wall >= held
    assert cpu < held / 5  # a sleep: the wait costs no CPU
    (line,) = read_timeline(tmp_path / "timeline.jsonl")
    assert line["kind"] == "call" and line["what"] == "RunInstances"
    assert line["end"] - line["start"] >= held - 0.01


def test_a_held_state_is_released_by_a_timer_at_no_cpu_and_recorded(tmp_path):
    recorder = Recorder(tmp_path / "timeline.jsonl")
    seconds = Timings(0.002).wait(Wait.SNAPSHOT_COMPLETE)  # 0.36 s
    released = threading.Event()

    def release() -> bool:
        released.set()
        return True

    wall, cpu = time.perf_counter(), time.process_time()
    hold(Wait.SNAPSHOT_COMPLETE, "snap-1", seconds, release, recorder)
    assert not released.is_set()  # held now, released later
    assert released.wait(10)
    time.sleep(0.05)  # the line is written just after the release
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= seconds and cpu < seconds / 5
    (line,) = read_timeline(tmp_path / "timeline.jsonl")
    assert (line["kind"], line["what"], line["resource"]) == (
        "wait", Wait.SNAPSHOT_COMPLETE.value, "snap-1")
    assert line["end"] - line["start"] >= 0.002 * WAITS[Wait.SNAPSHOT_COMPLETE].seconds - 0.01


def test_a_release_that_changed_nothing_records_nothing(tmp_path):
    recorder = Recorder(tmp_path / "timeline.jsonl")
    done = threading.Event()
    hold(Wait.VOLUME_ATTACH, "vol-1", 0.01, lambda: done.set() or False, recorder)
    assert done.wait(10)
    time.sleep(0.05)
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
