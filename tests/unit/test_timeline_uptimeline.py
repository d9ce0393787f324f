"""plan.uptimeline: an `up`'s reported events -> the bars of its chart."""

from __future__ import annotations

from clusterkit.timeline.uptimeline import Bar, Mark, bars


def test_stage_rows_and_node_rows():
    marks = [Mark(0.0, "stage-started", "key-pair"), Mark(0.5, "stage-started", "stack"),
             Mark(30.0, "stage-done", "stack"), Mark(31.0, "stage-started", "launch"),
             Mark(33.0, "stage-done", "launch"), Mark(40.0, "stage-started", "ssh"),
             Mark(52.0, "progress", "ssh", "i-1"), Mark(55.0, "progress", "ssh", "i-0"),
             Mark(56.0, "stage-started", "bootstrap"),
             Mark(60.0, "progress", "bootstrap", "i-0"),
             Mark(70.0, "progress", "bootstrap", "i-0"),  # its last step
             Mark(66.0, "progress", "bootstrap", "i-1"), Mark(71.0, "info")]
    chart = bars(marks, end=72.0)
    assert chart[:5] == [Bar("stage key-pair", "key-pair", 0.0, 0.5),
                         Bar("stage stack", "stack", 0.5, 30.0),
                         Bar("stage launch", "launch", 31.0, 33.0),
                         Bar("stage ssh", "ssh", 40.0, 56.0),
                         Bar("stage bootstrap", "bootstrap", 56.0, 72.0)]
    assert chart[5:] == [Bar("node i-0", "bootstrap", 56.0, 70.0),
                         Bar("node i-0", "ssh", 40.0, 55.0),
                         Bar("node i-1", "bootstrap", 56.0, 66.0),
                         Bar("node i-1", "ssh", 40.0, 52.0)]
    assert bars([]) == []
    assert Mark.from_json(marks[6].to_json()) == marks[6]


def test_node_rows_are_named_by_role_in_index_order():
    """With the record's names, a node's row is master / worker-N (worker-10 after
    worker-2), not its instance id; a node the record does not name keeps its id, last."""
    marks = [Mark(0.0, "stage-started", "ssh")] + [
        Mark(1.0 + k, "progress", "ssh", f"i-{k}") for k in (10, 2, 0, 7)]
    names = {"i-0": "master", "i-2": "worker-2", "i-10": "worker-10"}
    rows = [b.row for b in bars(marks, end=20.0, names=names)]
    assert rows == ["stage ssh", "master", "worker-2", "worker-10", "node i-7"]
