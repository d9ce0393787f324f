"""A Capacity Block's end as the node's supervisor sees it (node.interruption): AWS
begins terminating a block's instances 30 minutes before its end and warns 10 minutes
earlier, with no notice in the instance metadata, so the block's end (job.json's
``block_end``) becomes an interruption notice 40 minutes before it, whose instance goes
at the start of the terminations; the checkpoint grace is capped to end before that, and
the job's reason names the block. Clocks are given: nothing waits."""

from __future__ import annotations

from clusterkit.node import coord, interruption
from clusterkit.node.interruption import (
    BLOCK_END_ACTION,
    NoticeKind,
    Watcher,
    block_end_notice,
    grace_seconds,
    watcher_of,
)

END = 1767225600.0  # 2026-01-01 00:00 UTC


def test_the_block_end_is_a_notice_40_minutes_ahead_for_the_terminations_30_minutes_ahead():
    assert block_end_notice(END, END - 2401) is None
    notice = block_end_notice(END, END - 2400)
    assert notice is not None and notice.kind is NoticeKind.INTERRUPTION
    assert (notice.at, notice.action) == (END - 1800, BLOCK_END_ACTION)
    assert grace_seconds(notice, 90, END - 2400) == 90  # ten minutes ahead: the full grace
    assert grace_seconds(notice, 90, END - 1850) == 40  # capped: ends 10 s before
    assert grace_seconds(notice, 90, END) == 0


def test_the_watcher_says_the_block_end_once_without_any_metadata():
    now = [END - 3000.0]
    watcher = Watcher(None, poll=0, clock=lambda: 0.0, block_end=END, wall=lambda: now[0])
    assert watcher.check() == []
    now[0] = END - 2000
    [notice] = watcher.check()
    assert notice.action == BLOCK_END_ACTION and watcher.unavailable is None
    assert watcher.check() == []  # said once


def test_job_json_makes_the_watcher_from_imds_and_block_end():
    assert watcher_of({"imds": ""}) is None
    only_block = watcher_of({"imds": "", "block_end": END})
    assert only_block is not None and only_block.metadata is None
    assert only_block.block_end == END
    both = watcher_of({"imds": "http://127.0.0.1:9", "block_end": END})
    assert both is not None and both.metadata is not None
    assert watcher_of({"imds": "http://127.0.0.1:9"}).block_end is None


def test_the_job_is_interrupted_with_the_block_end_as_its_reason():
    notice = block_end_notice(END, END - 2400)
    outcome = coord.interrupted_outcome(2, notice)
    state, reason = outcome.state, outcome.reason
    assert state == "interrupted"
    assert reason == ("node 2: its Capacity Block ends (AWS terminates its instances from "
                      "23:30:00 UTC)")
    spot = interruption.Notice(NoticeKind.INTERRUPTION, END, "terminate")
    assert "spot interruption notice" in coord.interrupted_outcome(1, spot).reason
