"""bench/bench_recovery.py's pure helpers: train's output read per worker (first steps,
after a restart too, and results), the phases between a recovery's marks, the job's
expected result and its length and grace beside the notice."""

from __future__ import annotations

import pytest

from bench.bench_recovery import (
    first_steps,
    grace,
    job_steps,
    phases,
    results,
    table,
)
from bench.resumable import LR, want

OUTPUT = [
    (1.0, "[master/scheduler] started"),
    (2.0, "[master/worker-0] resumed from step 0 restart 0"),
    (3.0, "[master/worker-0] step 1"),
    (3.5, "[worker-1/worker-0] resumed from step 0 restart 0"),
    (4.0, "[worker-1/worker-0] step 1"),
    (5.0, "[master/worker-0] step 3"),
    (6.0, "[worker-1/worker-0] step 3"),
    (7.0, "[master/server-0] step 9"),
    (9.0, "[master/worker-0] resumed from step 4 restart 1"),
    (9.5, "[worker-1/worker-0] step 5"),  # before its resume line: the old job's
    (10.0, "[worker-1/worker-0] resumed from step 4 restart 1"),
    (11.0, "[master/worker-0] step 5"),
    (12.0, "[worker-1/worker-0] step 5"),
    (13.0, "[worker-1/worker-0] step 6"),
    (14.0, '[master/worker-0] RESULT [-1.0, -1.0]'),
    (14.0, '[worker-1/worker-0] RESULT [-1.0, -1.5]'),
]


def test_first_steps_of_every_worker_not_servers():
    assert first_steps(OUTPUT) == {"master/worker-0": 3.0, "worker-1/worker-0": 4.0}
    assert first_steps(OUTPUT, least=3) == {"master/worker-0": 5.0, "worker-1/worker-0": 6.0}
    assert first_steps(OUTPUT[:5], least=3) == {}


def test_first_steps_after_the_restart_wait_for_each_workers_resume_line():
    assert first_steps(OUTPUT, restart=1) == {"master/worker-0": 11.0,
                                              "worker-1/worker-0": 12.0}
    assert first_steps(OUTPUT, restart=2) == {}


def test_results_per_worker():
    assert results(OUTPUT) == {"master/worker-0": [-1.0, -1.0],
                               "worker-1/worker-0": [-1.0, -1.5]}


def test_phases_between_marks_a_missing_one_joins_the_next():
    assert phases([0.0, 1.0, 3.0, 6.0]) == [1.0, 2.0, 3.0]
    assert phases([0.0, 1.0, None, 6.0]) == [1.0, None, 5.0]


def test_want_is_sgd_on_the_summed_pushes():
    assert want(10, 2) == pytest.approx(1.0 - LR * 10 * 3)
    assert want(0, 4) == 1.0


def test_the_job_outlasts_the_notice_and_the_grace_fits_inside_it():
    for notice in (12.0, 120.0):
        assert job_steps(notice) * 0.5 > notice + 3 * 0.5
        assert 1.0 <= grace(notice) <= 90.0
    assert grace(120.0) == 90.0  # EC2's two minutes: the product's default grace
    assert grace(12.0) == 1.0


def test_table_has_a_row_per_recovery_with_its_ratio_to_fresh():
    size = {"nodes": 2, "fresh_s": 20.0, "fresh_up_s": 16.0, "recoveries": [
        {"what": "notice, no standby", "seconds": 8.0, "phases": [1.0, 1.0, None, 2.0, 4.0],
         "record_to_running": 3.5, "node_hours_lost": 0.002, "resumed_from": [4, 4]}]}
    lines = table(size)
    assert lines[0].startswith("2 nodes: fresh") and "20.00 s" in lines[0]
    assert lines[3] == "| notice, no standby | 8.00 | 0.40 | 1.00 | 1.00 | - | 2.00 | 4.00 " \
                       "| 3.50 | 0.0020 |"
