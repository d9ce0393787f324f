"""cluster/jobs/exporter.py: `--prometheus`'s address (loopback only in sandbox mode,
exit 2 naming the option), the HTTP server scraped for real over loopback (each scrape
maps the snapshot it finds then), and the exporter's refresh: each node's start read
for the job's cost, and the move to a newer job. Mocked: the nodes (SSH: the frames and
the job states are stand-ins here; tests/e2e/test_top.py scrapes a sandbox job)."""

from __future__ import annotations

import dataclasses
import urllib.request
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clusterkit.cluster.jobs import exporter as ex
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.top import TopFrame, row_of
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.kinds import Market
from clusterkit.netguard import SANDBOX_ENV
from clusterkit.node.jobstate import JobState, JobStateName
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Hop, Login, Target
from clusterkit.training.prometheus import NodeView, Snapshot


@pytest.mark.parametrize("text", ["0.0.0.0:9101", "10.1.2.3:9101", "[::]:9101",
                                  "example.com:9101"])
def test_sandbox_mode_serves_on_loopback_only(monkeypatch, text):
    monkeypatch.setenv(SANDBOX_ENV, "1")
    with pytest.raises(UsageError) as caught:
        ex.listen_address(text)
    assert caught.value.exit_code == 2
    assert f"--prometheus {text}" in str(caught.value) and "loopback" in str(caught.value)
    assert "--prometheus 127.0.0.1:9101" in caught.value.hint


def test_loopback_in_sandbox_mode_and_any_address_outside(monkeypatch):
    monkeypatch.setenv(SANDBOX_ENV, "1")
    assert ex.listen_address("9101") == ("127.0.0.1", 9101)
    assert ex.listen_address("127.0.0.2:0") == ("127.0.0.2", 0)
    assert ex.listen_address("localhost:9101") == ("localhost", 9101)
    monkeypatch.delenv(SANDBOX_ENV)
    assert ex.listen_address("0.0.0.0:9101") == ("0.0.0.0", 9101)


def test_a_malformed_address_is_a_usage_error():
    with pytest.raises(UsageError, match=r"--prometheus 9101x: '9101x' is no port"):
        ex.listen_address("9101x")


def sample(t: float, node: int, rate: float) -> dict:
    return {"v": 1, "t": t, "node": node, "dt": 1.0, "job_cpu": 0.25,
            "mem": {"used_mb": 1000, "total_mb": 4000}, "samples_per_s": rate}


@dataclass
class Held:
    snapshot: Snapshot | None = None


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    return {f"{s.name}/{s.labels.get('node', '')}": s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_each_scrape_reads_the_snapshot_of_that_moment():
    held = Held()
    server = ex.serve(held, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        url = ex.url("127.0.0.1", server.server_address[1])
        assert scrape(url) == {}  # before the first refresh
        for rate in (10.0, 20.0):
            held.snapshot = Snapshot("c1", "j1", (NodeView(
                0, "master", "c5.large", 0.1, 0.0, (sample(5.0, 0, rate),)),))
            found = scrape(url)
            assert found["clusterkit_samples_per_second/master"] == rate
        assert found["clusterkit_node_memory_total_bytes/master"] == 4000 * 1024 * 1024
        assert not [k for k in found if k.startswith(("process_", "python_"))]
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_in_use_is_a_runtime_error_naming_it():
    server = ex.serve(Held(), "127.0.0.1", 0)  # type: ignore[arg-type]
    port = server.server_address[1]
    try:
        with pytest.raises(ClusterkitError) as caught:
            ex.serve(Held(), "127.0.0.1", port)  # type: ignore[arg-type]
        assert caught.value.exit_code == 1
        assert f"http://127.0.0.1:{port}/metrics" in str(caught.value)
    finally:
        server.shutdown()
        server.server_close()


def job_cluster(count: int) -> JobCluster:
    nodes = [Node(f"i-{i}", i, "running", "c5.large", "us-east-1a", Market.SPOT,
                  "us-east-1", price=0.036) for i in range(count)]
    targets = [Target(n, Hop(f"10.0.0.{n.index}", f"127.0.0.{n.index + 2}")) for n in nodes]
    return JobCluster("c1", None, Login("c1"), nodes, targets)


@dataclass
class FakeTop:
    """``Top`` without SSH: each frame takes one more sample per node of its job."""

    jc: JobCluster
    job_id: str = ""
    clock: object = None
    windows: dict[int, list[dict]] = field(default_factory=dict)
    newest: str = "j1"  # the job the cluster's nodes would answer for

    def frame(self) -> TopFrame:
        self.job_id = self.job_id or self.newest
        for n in self.jc.nodes:
            window = self.windows.setdefault(n.index, [])
            window.append(sample(100.0 + len(window), n.index, 10.0))
        rows = tuple(row_of(self.jc.node_name(n.index), n.index, self.windows[n.index])
                     for n in self.jc.nodes)
        return TopFrame("c1", self.job_id, 0.0, rows)


def states(job_id: str, started: float) -> list[JobState]:
    return [JobState(job_id, 0, JobStateName.RUNNING, None, None, (), (), True, started,
                     started=started)]


def test_refresh_reads_each_node_s_start_then_moves_to_a_newer_job(monkeypatch):
    jc = job_cluster(2)
    now = [0.0]
    jobs = {"j1": 40.0}
    asked: list[int] = []

    def node_jobs(cluster):
        asked.append(1)
        return {t.hop.label: [s for job, at in jobs.items() for s in states(job, at)]
                for t in cluster.targets}

    monkeypatch.setattr(ex.nodejobs, "node_jobs", node_jobs)
    monkeypatch.setattr(ex, "Top", lambda jc, job_id, clock: FakeTop(jc, job_id, clock))
    exporter = ex.Exporter(FakeTop(jc), follow=True, clock=lambda: now[0])
    exporter.refresh()
    assert exporter.snapshot.job_id == "j1" and exporter.started == {0: 40.0, 1: 40.0}
    assert [n.started for n in exporter.snapshot.nodes] == [40.0, 40.0]
    assert exporter.snapshot.nodes[1].price == 0.036
    now[0] = 30.0
    jobs["j2"] = 200.0  # a newer job started: seen at the next read of the states
    exporter.refresh()
    assert exporter.snapshot.job_id == "j1" and len(asked) == 1
    now[0] = 60.0
    exporter.refresh()
    assert exporter.snapshot.job_id == "j2" and exporter.started == {0: 200.0, 1: 200.0}
    assert [len(n.samples) for n in exporter.snapshot.nodes] == [1, 1]  # a fresh window


def test_with_job_given_the_exporter_stays_on_it(monkeypatch):
    jc = job_cluster(1)
    monkeypatch.setattr(ex.nodejobs, "node_jobs", lambda cluster: {
        t.hop.label: states("j1", 40.0) + states("j2", 90.0) for t in cluster.targets})
    exporter = ex.Exporter(FakeTop(jc, "j1"), follow=False, clock=lambda: 0.0)
    assert exporter.refresh().job_id == "j1" and exporter.started == {0: 40.0}


def test_nodes_that_do_not_answer_their_states_leave_the_start_unknown(monkeypatch):
    def fails(cluster):
        raise ClusterkitError("worker-1: connection refused")

    monkeypatch.setattr(ex.nodejobs, "node_jobs", fails)
    exporter = ex.Exporter(FakeTop(job_cluster(2)), follow=True, clock=lambda: 0.0)
    exporter.refresh()
    assert exporter.started == {} and exporter.snapshot.nodes[0].started is None
    assert dataclasses.asdict(exporter.snapshot.nodes[0])["samples"]
