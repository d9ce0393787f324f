"""cluster/jobs/report.py: each node's totals and the master's kept report read through
the observer's ``summary`` frame; a record newer than this client reads is a
ClusterkitError naming the node, the file and both versions."""

from __future__ import annotations

import json

import pytest

from clusterkit.cluster.jobs.report import REPORT, kept_report, summaries
from clusterkit.errors import ClusterkitError
from clusterkit.node.frames import EXIT_UNREADABLE, SummaryFrame
from clusterkit.node.totals import Summary
from clusterkit.training.report import JobReport, build
from tests.unit.test_cluster_top import answering

JOB = "j-20260101-120000-abcd"


def frame(report: dict | None = None, seconds: float = 60.0) -> str:
    return json.dumps(SummaryFrame(Summary(first_t=0.0, last_t=seconds, seconds=seconds),
                                   report).to_json())


def test_the_nodes_totals_and_the_kept_report_read_back():
    kept = build("c1", "j-1", "succeeded", 0.0, 60.0, [], {}).to_json()
    jc = answering(2, {0: (0, frame(kept), ""), 1: (0, frame(None, 30.0), "")})
    found = summaries(jc, JOB)
    assert found[1].totals == Summary(first_t=0.0, last_t=30.0, seconds=30.0)
    assert kept_report(jc, found) == JobReport.from_json(kept, REPORT)
    assert kept_report(jc, {1: found[1]}) is None  # no master: nothing kept


def test_a_newer_record_is_an_error_naming_the_node_the_file_and_both_versions():
    said = ("/home/u/.clusterkit/jobs/j-1/summary.json: job totals is schema version 2, "
            "newer than this program reads (1)")
    jc = answering(2, {0: (0, frame(), ""), 1: (EXIT_UNREADABLE, "", said + "\n")})
    with pytest.raises(ClusterkitError) as refused:
        summaries(jc, JOB)
    assert str(refused.value) == f"worker-1: {said}" and refused.value.hint
    jc = answering(1, {0: (0, frame({"v": 3, "job_id": "j-1"}), "")})
    with pytest.raises(ClusterkitError) as refused:
        kept_report(jc, summaries(jc, JOB))
    assert str(refused.value).startswith("master: report.json: job report is schema "
                                         "version 3, newer than this program reads (1)")
    jc = answering(1, {0: (0, json.dumps({"v": 2, "totals": None}), "")})
    with pytest.raises(ClusterkitError, match="master: observer summary: observer summary "
                                              "is schema version 2"):
        summaries(jc, JOB)
