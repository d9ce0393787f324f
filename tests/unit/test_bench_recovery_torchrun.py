"""bench/bench_recovery_torchrun.py's pure part: rank 0's lines after the notice -> when
it trains again (any size, full size), the seconds it did not step and the steps it
trained again."""

from __future__ import annotations

from bench.bench_recovery_torchrun import master_marks, report

ELASTIC = [  # 2 nodes, min 1: goes on with 1, then back to 2
    (1.0, "[master/torchrun] ddp rank 0: world 2 of 2, lr 0.05"),
    (2.0, "[master/torchrun] ddp rank 0: step 1/9 loss 1.0"),
    (3.0, "[master/torchrun] ddp rank 0: step 2/9 loss 0.9"),
    (3.5, "[worker-1] spot interruption notice"),
    (5.0, "[master/torchrun] ddp rank 0: world 1 of 2, lr 0.025"),
    (6.0, "[master/torchrun] checkpoint: resumed from step 1 (restart 0)"),
    (7.0, "[master/torchrun] ddp rank 0: step 2/9 loss 0.9"),
    (8.0, "[worker-1/torchrun] ddp rank 0: step 9/9 loss 0.1"),  # not the group's rank 0
    (9.0, "[master/torchrun] ddp rank 0: world 2 of 2, lr 0.05"),
    (10.0, "[master/torchrun] checkpoint: resumed from step 2 (restart 0)"),
    (12.0, "[master/torchrun] ddp rank 0: step 3/9 loss 0.8"),
]


def test_elastic_trains_again_smaller_then_at_full_size() -> None:
    assert master_marks(ELASTIC, 3.5) == {"again": 7.0, "full": 12.0, "idle": 9.0, "lost": 1}


def test_a_restart_at_full_size_is_both_marks_at_once() -> None:
    lines = [*ELASTIC[:4], (20.0, "[master/torchrun] ddp rank 0: world 2 of 2, lr 0.05"),
             (21.0, "[master/torchrun] checkpoint: resumed from step 2 (restart 1)"),
             (22.0, "[master/torchrun] ddp rank 0: step 3/9 loss 0.8")]
    assert master_marks(lines, 3.5) == {"again": 22.0, "full": 22.0, "idle": 19.0,
                                        "lost": 0}


def test_rank_0_on_another_node_after_a_new_round_counts() -> None:
    """4 nodes, min 3: the round without worker-3 gives rank 0 to worker-1."""
    lines = [(1.0, "[master/torchrun] ddp rank 0: world 4 of 4, lr 0.1"),
             (2.0, "[master/torchrun] ddp rank 0: step 2/9 loss 0.9"),
             (3.5, "[worker-3] spot interruption notice"),
             (5.0, "[worker-1/torchrun] ddp rank 0: world 3 of 4, lr 0.075"),
             (5.5, "[master/torchrun] checkpoint: resumed from step 2 (restart 0)"),
             (6.0, "[worker-1/torchrun] checkpoint: resumed from step 1 (restart 0)"),
             (7.0, "[worker-1/torchrun] ddp rank 0: step 2/9 loss 0.9"),
             (8.0, "[master/torchrun] ddp rank 0: step 3/9 loss 0.8"),  # the old group's
             (9.0, "[master/torchrun] ddp rank 0: world 4 of 4, lr 0.1"),
             (10.0, "[master/torchrun] ddp rank 0: step 3/9 loss 0.8")]
    assert master_marks(lines, 3.5) == {"again": 7.0, "full": 10.0, "idle": 8.0, "lost": 1}


def test_no_start_after_the_notice_is_no_mark() -> None:
    assert master_marks(ELASTIC[:3], 3.5) == {"again": None, "full": None, "idle": 0.0,
                                              "lost": 0}


def test_the_report_says_the_goal_met_or_missed() -> None:
    ways = [{"way": "elastic", "again_s": 12.5, "full_s": 40.0, "idle_s": 9.0,
             "steps_lost": 1, "samples_lost": 64},
            {"way": "stop, replace, restart", "again_s": 95.0, "full_s": 95.0,
             "idle_s": 20.0, "steps_lost": 0, "samples_lost": 0}]
    lines = report(1.0, [{"nodes": 2, "ways": ways}, {"nodes": 4, "ways": [
        {**ways[0], "again_s": 16.0}, ways[1]]}])
    assert "| 2 | elastic | 12.50 | 40.00 | 9.00 | 1 | 64 | 7.27 |" in lines
    goals = [line for line in lines if line.startswith("goal:")]
    assert goals[0].startswith("goal: elastic trains again within 15 s on 2 nodes: met")
    assert goals[1].startswith("goal: elastic trains again within 15 s on 4 nodes: missed")
