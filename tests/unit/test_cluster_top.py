"""cluster/jobs/top.py's pure parts: a node's row from its samples, the frame's JSON,
the follower's lines read, and `train`'s findings teller (each kind said once, when it
first appears, naming the nodes)."""

from __future__ import annotations

import json

import pytest

from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.top import FindingsTeller, TopFrame, row_of
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Login


def sample(t: float, node: int, *, rate: float | None = 100.0, cpu: float = 0.5,
           gpus: list[dict] | None = None) -> dict:
    found = {"t": t, "node": node, "dt": 2.0, "job_cpu": cpu,
             "cpu": {"user": 10.0, "system": 2.0, "idle": 87.0, "iowait": 1.0},
             "net": {"rx_Bps": 1e6, "tx_Bps": 2e6},
             "disk": {"device": "nvme1n1", "read_MBps": 5.0, "read_ms_per_op": 0.4},
             "samples_per_s": rate, "progress_at": t}
    if gpus is not None:
        found["gpus"] = gpus
    return found


def test_a_row_is_the_newest_sample_with_a_smoothed_rate():
    samples = [sample(float(t), 1, rate=r) for t, r in
               enumerate([10.0, 100.0, 200.0, None, 300.0, 400.0, 500.0])]
    row = row_of("worker-1", 1, samples)
    assert row.samples_per_s == pytest.approx((200 + 300 + 400 + 500) / 4)
    assert (row.job_cpu, row.iowait, row.net_rx, row.disk_read) == (0.5, 1.0, 1e6, 5.0)
    assert row.gpus == () and row.gpu_util is None and row.error is None
    gpus = [{"index": 0, "name": "A10G", "util": 90.0, "mem_used": 100, "mem_total": 200},
            {"index": 1, "name": "A10G", "util": 70.0, "mem_used": 100, "mem_total": 200}]
    assert row_of("master", 0, [sample(1.0, 0, gpus=gpus)]).gpu_util == 80.0
    assert "no sample yet" in (row_of("master", 0, []).error or "")


def test_the_frame_sums_the_nodes_rates_into_json():
    rows = (row_of("master", 0, [sample(1.0, 0, rate=100.0)]),
            row_of("worker-1", 1, [sample(1.0, 1, rate=50.0)]),
            row_of("worker-2", 2, []))
    data = TopFrame("c1", "j-1", 5.0, rows, (), "no GPU").to_json()
    assert data["samples_per_s"] == 150.0 and len(data["nodes"]) == 3
    assert data["nodes"][2]["error"] and data["nodes"][0]["gpus"] == []
    assert json.loads(json.dumps(data)) == data


def cluster(count: int) -> JobCluster:
    nodes = [Node(f"i-{i}", i, "running", "c5.large", "us-east-1a", Market.SPOT, "us-east-1")
             for i in range(count)]
    return JobCluster("c1", None, Login("c1"), nodes, [])


def test_the_teller_says_each_finding_once_naming_the_nodes():
    said: list[str] = []
    now = [0.0]
    teller = FindingsTeller(cluster(3), said.append, clock=lambda: now[0])
    for step in range(30):
        now[0] = step * 2.0
        for node in range(3):
            teller.add(node, sample(step * 2.0, node, rate=20.0 if node == 2 else 100.0))
    stragglers = [line for line in said if "straggler" in line]
    assert len(stragglers) == 1 and "on worker-2:" in stragglers[0], said
    assert "samples/s" in stragglers[0] and "fix:" in stragglers[0]
    assert not [line for line in said if "healthy" in line]


def test_top_s_job_cpu_column_and_its_finding_say_the_same_figure():
    """The sandbox's job: an import burst, then 0.04 cores on the master and 0.21 on the
    worker, no throughput line. The column shows 0.04 / 0.21 cores (not 0.0), the finding
    the same two figures, and it says there is no throughput data (not healthy)."""
    from rich.console import Console

    from clusterkit.cli.top import findings_text, table
    from clusterkit.training import diagnose

    cpus = {0: [1.6, 0.9] + [0.04] * 8, 1: [1.7, 1.0] + [0.21] * 8}
    windows = {node: [sample(2.0 * t, node, rate=None, cpu=c) for t, c in enumerate(cpu)]
               for node, cpu in cpus.items()}
    rows = tuple(row_of(name, i, windows[i]) for i, name in enumerate(["master", "worker-1"]))
    assert [r.job_cpu for r in rows] == [pytest.approx(0.04), pytest.approx(0.21)]
    ctx = diagnose.Context("c5.large", vcpus=2, gpus=0, network_gbps=10.0)
    found = diagnose.diagnose(windows, ctx)
    frame = TopFrame("c1", "j-1", 20.0, rows, tuple(found))
    console = Console(width=200, record=True)
    console.print(table(frame))
    console.print("\n".join(findings_text(frame)))
    text = console.export_text()
    assert "0.04 cores" in text and "0.21 cores" in text and "0.0 cores" not in text
    assert [f.kind for f in found] == [diagnose.Kind.NO_THROUGHPUT]
    assert "job CPU 0.04 to 0.21 of 2 cores per node" in found[0].evidence
    assert "no throughput data" in text and "healthy" not in text


NEWER = ("/home/u/.clusterkit/jobs/j-1/metrics.jsonl: metrics sample is schema version 2, "
         "newer than this program reads (1) (the client and the node's programs differ)")


def answering(count: int, answers: dict[int, tuple[int, str, str]]) -> JobCluster:
    """A cluster of ``count`` nodes whose every call gets, per node index, (exit code,
    stdout, stderr)."""
    from dataclasses import dataclass

    from clusterkit.remote.connect import Hop, Target
    from clusterkit.remote.results import GroupResult, NodeResult

    base = cluster(count)
    targets = [Target(n, Hop(f"c1-{n.index}", f"10.0.0.{n.index}")) for n in base.nodes]

    @dataclass(frozen=True)
    class Answering(JobCluster):
        def run(self, targets, calls, **options):  # type: ignore[override]
            return GroupResult(NodeResult(t.node, t.hop.label, t.hop.address,
                                          exit_code=answers[t.node.index][0],
                                          stdout=answers[t.node.index][1],
                                          stderr=answers[t.node.index][2])
                               for t in targets if t.hop.label in calls)

    return Answering(base.name, None, base.login, base.nodes, targets)


def test_top_names_the_node_whose_records_are_newer_than_this_client_reads():
    """worker-1's observer refused a newer sample (its exit 3, its stderr); worker-2
    answered a frame of a newer version: each row says it, naming its node, the file
    and both versions; the master's row is as ever."""
    from clusterkit.cluster.jobs.top import Top
    from clusterkit.node.frames import EXIT_UNREADABLE, Frame
    from clusterkit.node.samples import Sample

    good = Frame("j-1", (Sample.from_json(sample(10.0, 0), "master"),)).to_json()
    jc = answering(3, {0: (0, json.dumps(good), ""),
                       1: (EXIT_UNREADABLE, "", f"some warning\n{NEWER}\n"),
                       2: (0, json.dumps({**good, "v": 2}), "")})
    frame = Top(jc, clock=lambda: 12.0).frame()
    master, worker1, worker2 = frame.rows
    assert master.error is None and master.job_cpu == 0.5 and frame.job_id == "j-1"
    assert worker1.error == f"worker-1: {NEWER}"
    assert worker2.error is not None and worker2.error.startswith("worker-2: observer frame")
    assert "schema version 2, newer than this program reads (1)" in worker2.error
    assert json.loads(json.dumps(frame.to_json()))["nodes"][1]["error"] == worker1.error


def test_the_teller_says_once_per_node_that_its_samples_are_newer():
    said: list[str] = []
    teller = FindingsTeller(cluster(2), said.append, clock=lambda: 0.0)
    for step in range(3):
        teller.add(1, {**sample(step * 2.0, 1), "v": 2})
    assert said == ["[diagnosis] not diagnosed: worker-1: metrics.jsonl: metrics sample is "
                    "schema version 2, newer than this program reads (1) (the client and "
                    "the node's programs differ: `clusterkit up` ships the client's "
                    "programs to every node again)"]
    assert teller.windows == {} and teller.told == {}


def test_top_shows_an_elastic_jobs_size_now_and_over_time_as_train_says_it():
    """issue 42: the master's frame carries the job's size changes: `top` shows the size
    now (of the full size) and, once it changed, the sizes in turn and the node-hours
    at each, in the same words as `train` and `status` (``training.sizes.lines``); in
    --json, the size as data. A job that ended counts until its end, not now."""
    from clusterkit.cli.top import findings_text
    from clusterkit.cluster.jobs.top import Top
    from clusterkit.node.frames import Frame
    from clusterkit.node.samples import Sample
    from clusterkit.training import sizes

    changes = ((0.0, 3), (60.0, 2))

    def frame_of(state: str, updated: float) -> TopFrame:
        kept = {"v": 1, "job_id": "j-1", "state": state, "updated": updated}
        answers = {i: (0, json.dumps(Frame(
            "j-1", (Sample.from_json(sample(10.0, i), "n"),),
            state={**kept, "sizes": [list(x) for x in changes]} if i == 0 else kept
        ).to_json()), "") for i in range(3)}
        return Top(answering(3, answers), clock=lambda: 90.0).frame()

    running = frame_of("running", 89.0)
    assert running.sizes == changes and running.ended is None
    said = findings_text(running)
    assert said[:2] == sizes.lines(changes, 90.0, running=True) == [
        "size: 2 of 3 nodes",
        "nodes over time (of 3): 3 (60 s) -> 2 (30 s); node-hours 0.0500 at 3, 0.0167 at 2"]
    data = json.loads(json.dumps(running.to_json()))["size"]
    assert data == {"nodes": 2, "of": 3, "changes": [[0.0, 3], [60.0, 2]],
                    "node_hours": {"3": 0.05, "2": round(60 / 3600, 6)}}
    ended = frame_of("succeeded", 75.0)
    assert ended.ended == 75.0 and findings_text(ended)[0] == (
        "nodes over time (of 3): 3 (60 s) -> 2 (15 s); node-hours 0.0500 at 3, 0.0083 at 2")
    plain = TopFrame("c1", "j-1", 5.0, ())
    assert plain.to_json()["size"] is None and plain.size_lines() == []
    newer = {i: (0, json.dumps(Frame("j-1", state={"v": 9, "job_id": "j-1"}).to_json()), "")
             for i in range(3)}
    master = Top(answering(3, newer), clock=lambda: 90.0).frame().rows[0]
    assert "schema version 9" in (master.error or ""), master  # said, naming the master
