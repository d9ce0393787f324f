"""training/report.py: a job's report from each node's running totals and what the
client knows of the nodes (names, launch prices, on-demand prices)."""

from __future__ import annotations

import pytest

from clusterkit.node.totals import Totals
from clusterkit.training.report import NodeFacts, build, lines


def totals(util: list[float] | None, cpu: float, rate: float | None, seconds: int) -> dict:
    kept = Totals()
    kept.add({"t": 0.0, "dt": None})
    for i in range(1, seconds // 2 + 1):
        sample = {"t": 2.0 * i, "dt": 2.0, "job_cpu": cpu, "samples_per_s": rate}
        if util is not None:
            sample["gpus"] = [{"index": 0, "util": util[i % len(util)]}]
        kept.add(sample)
    return kept.to_json()


FACTS = [NodeFacts(0, "master", "p3.2xlarge", 3.06, 3.06),
         NodeFacts(1, "worker-1", "p3.2xlarge", 0.918, 3.06)]


def test_the_report_sums_nodes_prices_and_keeps_the_percentiles():
    report = build("c1", "j-1", "succeeded", 0.0, 3600.0, FACTS,
                   {0: totals([100.0, 0.0], 4.0, 100.0, 3600),
                    1: totals([50.0], 2.0, 50.0, 3600)})
    master, worker = report.nodes
    assert master.wall_s == 3600.0 and master.cost == pytest.approx(3.06)
    assert worker.cost == pytest.approx(0.918) and worker.on_demand_cost == pytest.approx(3.06)
    assert master.gpu_mean == pytest.approx(50.0) and master.gpu_p5 == 0.0
    assert master.gpu_p95 == 100.0 and worker.gpu_p5 == worker.gpu_p95 == 50.0
    assert master.cpu_mean == pytest.approx(4.0) and worker.samples_per_s == pytest.approx(50.0)
    assert report.samples_per_s == pytest.approx(150.0)
    assert report.samples == pytest.approx(150.0 * 3600)
    data = report.to_json()
    assert data["cost"] == pytest.approx(3.978) and data["on_demand_cost"] == pytest.approx(6.12)
    text = "\n".join(lines(report))
    assert "master: GPU 50% (p5 0%, p95 100%)" in text
    assert "on-demand would have cost $6.12" in text and "cost $3.98" in text


def test_a_cpu_node_without_price_or_samples_says_so():
    report = build("c1", "j-2", "failed", None, None,
                   [NodeFacts(0, "master", "c5.large", None, None)],
                   {0: totals(None, 0.5, None, 60)})
    [node] = report.nodes
    assert node.gpus is None and node.gpu_mean is None and node.samples_per_s is None
    assert node.wall_s == 60.0 and node.cost is None and report.total("cost") is None
    assert "no GPU" in lines(report)[1] and "$" not in lines(report)[1].split("samples,")[1][:3]


def test_a_node_without_totals_is_kept_with_nothing_measured():
    report = build("c1", "j-3", "interrupted", 0.0, 600.0, FACTS, {0: totals(None, 1, 1, 600)},
                   recoveries=[{"describe": "recovery 1: replaced worker-1 (notice)"}])
    assert [n.samples for n in report.nodes] == [pytest.approx(600.0), 0.0]
    assert report.nodes[1].wall_s == 600.0  # the job's wall time: its cost counts
    assert "recovery: recovery 1: replaced worker-1 (notice)" in lines(report)[-1]


def test_a_report_reads_back_from_its_json():
    from clusterkit.training.report import JobReport

    report = build("c1", "j-1", "succeeded", 0.0, 3600.0, FACTS,
                   {0: totals([100.0], 4.0, 100.0, 3600), 1: totals([50.0], 2.0, 50.0, 3600)},
                   findings=[{"kind": "straggler", "evidence": "x"}])
    again = JobReport.from_json(report.to_json(), "master: report.json")
    assert again == report and lines(again) == lines(report)


def test_the_preflight_is_kept_and_said_after_the_recoveries():
    from clusterkit.training import preflight as pre

    sick = pre.NodeCheck(1, "worker-1", "i-1", (pre.Verdict(
        pre.Check.GPUS, pre.Status.FAIL, "GPU 00000000:10:1C.0: row remapping failed"),))
    kept = pre.Preflight(((sick,), (pre.NodeCheck(1, "worker-1", "i-2", ()),)), None,
                         ("worker-1 i-1 -> i-2 (unhealthy)",)).to_json()
    report = build("c1", "j-1", "succeeded", 0.0, 60.0, FACTS, {}, preflight=kept)
    assert lines(report)[-5:] == [
        "  preflight round 1 (every node):",
        "    worker-1 (i-1): FAIL gpus: GPU 00000000:10:1C.0: row remapping failed",
        "    replaced: worker-1 i-1 -> i-2 (unhealthy)",
        "  preflight round 2 (the replacement(s)):", "    worker-1: ok ()"]
    assert lines(build("c1", "j-1", "succeeded", 0.0, 60.0, FACTS, {},
                       preflight={"rounds": "x"}))[-1] == \
        "  preflight: a record this client does not read"


def test_an_elastic_jobs_size_over_time_is_kept_and_said():
    """issue 42: the master's size changes go into report.json and its text: the sizes
    in turn and the node-hours at each size."""
    import dataclasses

    from clusterkit.training.report import JobReport

    report = dataclasses.replace(build("c1", "j-1", "succeeded", 0.0, 3600.0, FACTS, {}),
                                 sizes=((0.0, 2), (600.0, 1), (1200.0, 2)))
    again = JobReport.from_json(report.to_json(), "test")
    assert again.sizes == report.sizes
    assert "  nodes over time (of 2): 2 (10.0 min) -> 1 (10.0 min) -> 2 (40.0 min); " \
           "node-hours 1.6667 at 2, 0.1667 at 1" in lines(again)
    assert not any("nodes over time" in line for line in lines(dataclasses.replace(
        report, sizes=())))
