"""node/totals.py: a node's running totals from its metric samples (what the job's
report reads), and percentiles from the utilization histogram."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusterkit.node import totals
from clusterkit.node.totals import Totals, percentile


def sample(t: float, dt: float | None, *, util: list[float] | None = None,
           cpu: float | None = 1.0, rate: float | None = None) -> dict:
    found = {"t": t, "dt": dt, "job_cpu": cpu, "samples_per_s": rate}
    if util is not None:
        found["gpus"] = [{"index": i, "util": u} for i, u in enumerate(util)]
    return found


def test_totals_integrate_each_sample_over_its_interval():
    kept = Totals()
    kept.add(sample(100.0, None))  # the priming sample: a time, no rates
    for i in range(1, 51):  # 100 s at 2 s a sample
        kept.add(sample(100.0 + 2 * i, 2.0, util=[90.0, 70.0], cpu=3.0, rate=100.0))
    assert (kept.first_t, kept.last_t, kept.seconds) == (100.0, 200.0, 100.0)
    assert kept.cpu_core_seconds == 300.0 and kept.cpu_seconds == 100.0
    assert kept.samples == 10_000.0 and kept.gpus == 2
    assert kept.util_hist[80] == 100.0 and kept.gpu_seconds == 100.0
    # the steady state starts WARMUP_S after the first throughput (at 100 s)
    assert kept.steady_seconds == pytest.approx(100.0 - totals.WARMUP_S, abs=2.0)
    assert kept.steady_samples == pytest.approx(100.0 * kept.steady_seconds)
    again = Totals(kept.to_json())
    assert again.to_json() == kept.to_json()


def test_a_node_without_gpus_or_throughput_keeps_none_of_them():
    kept = Totals()
    for i in range(5):
        kept.add(sample(float(i), 1.0 if i else None, cpu=None))
    assert kept.gpus is None and kept.gpu_seconds == 0 and kept.samples == 0
    assert kept.cpu_seconds == 0 and kept.rate_from is None


def test_percentiles_of_the_histogram():
    hist = [0.0] * totals.BUCKETS
    hist[0], hist[50], hist[100] = 5.0, 90.0, 5.0
    assert percentile(hist, 0.05) == 0.0 and percentile(hist, 0.5) == 50.0
    assert percentile(hist, 0.96) == 100.0
    assert percentile([0.0] * totals.BUCKETS, 0.5) is None


def test_it_parses_as_python_3_8():
    ast.parse(Path(totals.__file__).read_text(), feature_version=(3, 8))
