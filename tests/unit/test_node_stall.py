"""node/stall.py: when a job hangs on a node (no progress line, idle GPUs or, without
GPUs, next to no CPU, for stall_after), found once."""

from __future__ import annotations

import ast
from pathlib import Path

from clusterkit.node import stall
from clusterkit.node.stall import StallWatch, idle


def gpu_sample(t: float, util: float, progress: float | None = None) -> dict:
    return {"t": t, "dt": 2.0, "progress_at": progress,
            "gpus": [{"index": 0, "util": util}, {"index": 1, "util": 0.0}]}


def test_idle_reads_the_busiest_gpu_else_the_jobs_cpu():
    assert idle(gpu_sample(0, 3.0)) is True and idle(gpu_sample(0, 40.0)) is False
    assert idle({"t": 0, "job_cpu": 0.01}) is True and idle({"t": 0, "job_cpu": 0.9}) is False
    assert idle({"t": 0, "job_cpu": None}) is None
    assert idle({"t": 0, "gpus": [{"index": 0, "util": None}]}) is None


def test_stalled_once_after_stall_after_of_idle_without_progress():
    watch = StallWatch(60.0, started=0.0)
    found = [t for t in range(0, 200, 2) if watch.update(gpu_sample(float(t), 0.0, 10.0))]
    assert found == [70]  # idle since 0 (the sample before 2), progress at 10: 10 + 60
    assert "60 s (train.stall_after)" in watch.reason(3) and "node 3" in watch.reason(3)


def test_progress_or_work_resets_the_clock():
    watch = StallWatch(30.0, started=0.0)
    for t in range(0, 100, 2):  # a progress line every 20 s: never stalled
        assert not watch.update(gpu_sample(float(t), 0.0, float(t - t % 20)))
    watch = StallWatch(30.0, started=0.0)
    for t in range(0, 100, 2):  # busy every 10th sample: idle never lasts 30 s
        assert not watch.update(gpu_sample(float(t), 90.0 if t % 20 == 0 else 0.0))


def test_it_parses_as_python_3_8():
    ast.parse(Path(stall.__file__).read_text(), feature_version=(3, 8))
