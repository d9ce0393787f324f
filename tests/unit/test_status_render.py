"""`clusterkit status` on a terminal: the default table fits 100 columns with nothing cut
to an ellipsis, --wide shows every column, times are local with the zone, money in
dollars. Rendered to a rich Console of a fixed width (no terminal needed)."""

from __future__ import annotations

import dataclasses
import io
import time
from datetime import datetime, timedelta, timezone

import pytest
from rich.console import Console

from clusterkit.cli.status_view import WIDE_COLUMNS, local_time, render_status, usd
from clusterkit.cluster.ops.status import StatusResult, node_row
from clusterkit.plan.nodes import CLUSTER_TAG, Node

LAUNCH = datetime(2026, 11, 23, 16, 5, tzinfo=timezone.utc)
NAME = "imagenet-p4d-spot-train"


@pytest.fixture()
def paris(monkeypatch: pytest.MonkeyPatch):
    """Local time is Europe/Paris (CET in November) for this test only."""
    monkeypatch.setenv("TZ", "Europe/Paris")
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _node(index: int, state: str = "running", cluster: str = NAME) -> Node:
    iid = f"i-0{index}23456789abcdef0"
    return Node(instance_id=iid, index=index, state=state, instance_type="p4d.24xlarge",
                az="us-east-1a", market="on-demand", region="us-east-1",
                launch_time=LAUNCH.isoformat(), public_ip=f"203.0.113.{100 + index}",
                private_ip=f"172.31.45.{200 + index}", price=32.7726,
                tags={CLUSTER_TAG: cluster})


def _result(nodes: list[Node]) -> StatusResult:
    now = LAUNCH + timedelta(hours=1)
    rows = [node_row(n, now) for n in nodes]
    costs = [r.cost_so_far for r in rows]
    return StatusResult(NAME, ["us-east-1"], rows,
                        round(sum(r.price_per_hour or 0 for r in rows), 4),
                        None if None in costs else round(sum(c or 0 for c in costs), 4))


def _render(result: StatusResult, width: int, wide: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, highlight=False)
    render_status(console, result, wide=wide)
    return out.getvalue()


def test_default_table_fits_100_columns_and_cuts_nothing(paris):
    text = _render(_result([_node(0), _node(1), _node(2)]), 100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, text
    assert "…" not in text and "..." not in text
    for expected in ("master", "worker-1", "worker-2", "p4d.24xlarge", "us-east-1a",
                     "on-demand", "running", "2026-11-23 17:05 CET", "$32.773", "$32.77",
                     f"cluster {NAME}", "total: $98.318/h, so far $98.32"):
        assert expected in text, (expected, text)
    assert sum("2026-11-23 17:05 CET" in line for line in lines) == 3
    assert "i-0023456789abcdef0" not in text  # the instance id is a --wide column


def test_wide_shows_every_column(paris):
    text = _render(_result([_node(0), _node(1), _node(2)]), 250, wide=True)
    header = next(line for line in text.splitlines() if "instance" in line)
    assert all(col in header for col in WIDE_COLUMNS), header
    for expected in ("i-0023456789abcdef0", "i-0223456789abcdef0", "203.0.113.101",
                     "172.31.45.202", "us-east-1 ", "2026-11-23 17:05 CET"):
        assert expected in text, (expected, text)
    assert "…" not in text


def test_stopped_node_is_shown_with_its_state(paris):
    text = _render(_result([_node(0), _node(1, state="stopped")]), 100)
    stopped = next(line for line in text.splitlines() if "worker-1" in line)
    assert "stopped" in stopped and "$32.773" in stopped
    assert "so far unknown" in text


def test_a_standby_is_shown_with_the_node_it_stands_by_and_its_cost(paris):
    from clusterkit.plan.nodes import standby_tags

    standby = dataclasses.replace(_node(7), index=None, tags=standby_tags(NAME, 2))
    text = _render(_result([_node(0), _node(1), _node(2), standby]), 100)
    line = next(line for line in text.splitlines() if "standby-2" in line)
    assert "$32.773" in line, text
    assert "total: $131.090/h" in text
    assert "standby-2 (i-0723456789abcdef0, $32.773/h): booted for worker-2" in \
        " ".join(text.split())


def test_every_cluster_gets_its_own_table(paris):
    result = _result([_node(0), _node(0, cluster="other"), _node(1, cluster="other")])
    result = dataclasses.replace(result, cluster=None)
    text = _render(result, 100)
    assert f"cluster {NAME} (us-east-1)" in text and "cluster other (us-east-1)" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_formatters():
    assert usd(1.234) == "$1.23" and usd(1234.5) == "$1,234.50" and usd(None) == "-"
    assert usd(0.096, per_hour=True) == "$0.096" and usd(None, per_hour=True) == "?"
    assert local_time("") == "-" and local_time("not a time") == "not a time"


def test_local_time_has_the_zone(paris):
    assert local_time("2026-11-23T16:05:00+00:00") == "2026-11-23 17:05 CET"
    assert local_time("2026-07-01T10:00:00Z") == "2026-07-01 12:00 CEST"


def test_dataset_clones_are_listed_with_hydration_and_in_json(paris):
    from clusterkit.cluster.ops.status import DatasetRow

    rows = [DatasetRow(0, "i-0", "vol-0a", "snap-0123456789abcdef0", 150, "42% (~3 min left)"),
            DatasetRow(1, "i-1", "vol-1b", "snap-0123456789abcdef0", 150, "unknown")]
    result = dataclasses.replace(_result([_node(0), _node(1)]), dataset=rows)
    out = _render(result, 100)
    assert "dataset master: vol-0a from snap-0123456789abcdef0, 150 GiB, hydration 42% " \
        "(~3 min left)" in out
    assert "dataset worker-1: vol-1b from snap-0123456789abcdef0, 150 GiB, hydration " \
        "unknown" in out
    assert result.to_json()["dataset"][1] == {
        "index": 1, "instance_id": "i-1", "volume_id": "vol-1b",
        "snapshot_id": "snap-0123456789abcdef0", "size_gib": 150, "hydration": "unknown"}


def test_the_newest_job_shows_its_cause_the_later_failures_and_every_node(paris):
    from clusterkit.cluster.jobs.results import JobSummary, report_failures
    from clusterkit.training import jobfiles

    master = jobfiles.state_of({
        "job_id": "j-20261123-170500-ab12", "state": "failed",
        "reason": "node 2 worker-0 exited with 1",
        "failed": {"node": 2, "process": "worker-0", "exit": 1, "time": 10.0},
        "others": [{"node": 1, "process": "server-0", "signal": 15, "time": 11.0}],
        "processes": {"scheduler": {"role": "scheduler", "state": "exited", "exit": -15}}})
    cause, others = report_failures(master, lambda i: "master" if i == 0 else f"worker-{i}")
    job = JobSummary(master.job_id, master.state, master.reason, cause, others,
                     {"master": master, "worker-1": None})
    text = _render(dataclasses.replace(_result([_node(0)]), job=job), 100)
    assert ("job j-20261123-170500-ab12: failed: worker worker-0 on worker-2 exited "
            "with 1") in text
    assert "also: server server-0 on worker-1 killed by SIGTERM" in text
    assert "master: failed: scheduler exited -15" in text
    assert "worker-1: no such job here" in text
    as_json = dataclasses.replace(_result([_node(0)]), job=job).to_json()["job"]
    assert as_json["state"] == "failed" and as_json["failed"]["node"] == "worker-2"
    assert as_json["others"][0]["signal"] == 15
    assert as_json["nodes"]["worker-1"] == {"message": "no such job here"}


def test_a_running_elastic_job_shows_its_size_now_and_over_time(paris, monkeypatch):
    """issue 42: the master's size changes, in the words `train` and `top` use."""
    from clusterkit.cli import status_view
    from clusterkit.cluster.jobs.results import JobSummary
    from clusterkit.training import jobfiles

    monkeypatch.setattr(status_view.time, "time", lambda: 90.0)
    master = jobfiles.state_of({"job_id": "j-1", "state": "running", "updated": 89.0,
                                "sizes": [[0.0, 3], [60.0, 2]]})
    job = JobSummary(master.job_id, master.state, None, None, (), {"master": master})
    text = _render(dataclasses.replace(_result([_node(0)]), job=job), 120)
    assert "  size: 2 of 3 nodes\n" in text
    assert "  nodes over time (of 3): 3 (60 s) -> 2 (30 s); node-hours 0.0500 at 3, " \
           "0.0167 at 2" in text
