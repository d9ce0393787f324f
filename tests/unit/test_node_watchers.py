"""node/watchers.py: each watch alone behind its one ``poll(now)``: what it saw as
events, nothing decided. Fakes stand for the metadata, the sampler and the GPUs (the
GPU text is a real capture); no daemon, no processes."""

from __future__ import annotations

from pathlib import Path

from clusterkit.node import gpuwatch, watchers
from clusterkit.node.interruption import Notice, NoticeKind
from clusterkit.node.jobfile import JobFile
from clusterkit.node.samples import read_summary
from clusterkit.node.stall import StallWatch
from clusterkit.node.watchers import EventKind

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"


class FakeMetadata:
    def __init__(self) -> None:
        self.notices: list = []
        self.unavailable: str | None = None

    def check(self) -> list:
        found, self.notices = self.notices, []
        return found


def test_the_interruption_watch_passes_each_notice_on_and_says_when_metadata_goes():
    meta = FakeMetadata()
    watch = watchers.InterruptionWatch(meta)
    assert watch.poll(0.0) == []
    notice = Notice(NoticeKind.INTERRUPTION, 100.0, "terminate")
    meta.notices, meta.unavailable = [notice], "metadata unreadable: timed out"
    first, second = watch.poll(1.0)
    assert (first.kind, first.notice) == (EventKind.NOTICE, notice)
    assert first.text.startswith("interruption notice: ")
    assert second == watchers.said("interruption watcher: metadata unreadable: timed out")
    assert watch.poll(2.0) == []  # said once
    meta.unavailable = None
    assert watch.poll(3.0) == [watchers.said("interruption watcher: metadata readable again")]


class FakeSampler:
    def __init__(self, samples: list) -> None:
        self.samples = samples

    def step(self, now: float) -> dict | None:
        if not self.samples:
            return None
        sample = self.samples.pop(0)
        if isinstance(sample, Exception):
            raise sample
        return sample


def test_the_sampler_watch_keeps_the_totals_and_says_a_stall_once(tmp_path: Path):
    idle = [{"t": 100.0 + 10 * i, "dt": 10.0, "job_cpu": 0.0} for i in range(3)]
    watch = watchers.SamplerWatch(FakeSampler([None, *idle]), str(tmp_path),
                                  StallWatch(15.0, started=95.0), node=2)
    assert watch.poll(100.0) == []  # not due
    assert watch.poll(100.0) == []  # idle 10 s
    [stall] = watch.poll(110.0)
    assert stall.kind is EventKind.STALL and stall.text.startswith("stalled on node 2")
    assert watch.poll(120.0) == []  # once
    assert read_summary(str(tmp_path)) is not None  # the running totals


def test_a_failing_sampler_is_said_once_then_left_off(tmp_path: Path):
    watch = watchers.SamplerWatch(FakeSampler([RuntimeError("smi"), {"t": 1.0}]),
                                  str(tmp_path), None, node=0)
    [event] = watch.poll(1.0)
    assert event.kind is EventKind.SAID and "metrics sampler stopped" in event.text
    assert watch.poll(2.0) == [] and watch.failed


def test_the_health_watch_makes_unfit_gpus_a_notice():
    text = (CAPTURES / "gpu-fallen-off-bus.dmesg.driver-570.txt").read_text(errors="replace")
    health = gpuwatch.HealthWatch(8, every=60, reader=lambda: {"kernel_log": text,
                                                               "smi_q": None}, started=0.0)
    watch = watchers.HealthWatch(health, lambda: 8)
    assert watch.poll(30.0) == []  # not due yet
    [event] = watch.poll(60.0)
    assert event.kind is EventKind.NOTICE and event.notice.kind is NoticeKind.UNFIT
    assert event.notice.action == "replace" and "Xid 79" in event.notice.reason
    assert event.text == f"GPUs unfit: {event.notice.reason}"


def test_job_json_says_which_watches_run_in_which_order(tmp_path: Path):
    bare = JobFile.from_json({"job_id": "j"}, "t")
    assert watchers.watches_of(bare, str(tmp_path), 0.0) == []
    full = JobFile.from_json({"job_id": "j", "imds": "http://127.0.0.1:9", "sampling": {
        "stall_after": 60, "health_every": 30, "gpus": 8}}, "t")
    found = watchers.watches_of(full, str(tmp_path), 0.0, sampler=FakeSampler([]))
    assert [type(w).__name__ for w in found] == ["InterruptionWatch", "SamplerWatch",
                                                 "HealthWatch"]
    assert found[1].stall is not None and found[2].gpus_seen() is None
