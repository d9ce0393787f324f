"""`clusterkit top` in the sandbox, for real: a 3-node MXNet job (real ps-lite scheduler,
servers and dist_async workers printing MXNet's Speedometer lines) sampled by each node's
supervisor; `top --once --json` (the CLI, as a user runs it) read while it runs, and
`top --prometheus` scraped over HTTP and read by prometheus_client's own parser.

What cannot run here: a GPU (the sandbox has none: no `gpus` field, a note saying so; the
GPU side is tested as data in tests/unit/test_training_sampler.py and
test_training_diagnose.py)."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sysconfig
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clusterkit.cluster.jobs.train import do_train
from clusterkit.training.diagnose import Kind
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session
from tests.e2e.test_train import CLI, Cluster
from tests.integration.conftest import runtime

# the job's batch size and its least time per batch (top_job.py runs on the nodes)
BATCH, PAUSE = ast.literal_eval(re.search(
    r"^BATCH, PAUSE = (.+)$", Path(__file__).with_name("top_job.py").read_text(),
    re.M).group(1))
SECTIONS = """\
train:
  framework: mxnet
  python: /usr/bin/python3
  command: python3 top_job.py burn 30
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}}}
  packages: []
  sample_interval: 1
"""


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("observe")
    name = support.unique_name("ob")
    spec = where / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=3, instance_type="c5.large",
                                 extra=SECTIONS.format(site=sysconfig.get_paths()["purelib"])))
    work = where / "work"
    work.mkdir()
    script = Path(__file__).with_name("top_job.py")
    (work / "top_job.py").write_text(script.read_text())
    cl = Cluster(name, spec, work)
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def top_once(cluster: Cluster) -> dict:
    run = cluster.cli("top", cluster.name, "--once", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def frame_with_rates(cluster: Cluster, job_id: str) -> dict:
    """The first frame in which every node has a job CPU figure and samples/s."""
    def ready() -> dict | None:
        frame = top_once(cluster)
        nodes = frame["nodes"]
        complete = len(nodes) == 3 and all(
            n["job_cpu"] is not None and n["samples_per_s"] for n in nodes)
        return frame if complete and frame["job_id"] == job_id else None

    return support.wait_for(ready, "every node sampled with samples/s", 90, interval=1)


def stop(cluster: Cluster, job_id: str) -> None:
    run = cluster.cli("stop", cluster.name, "--job", job_id)
    assert run.returncode == 0, run.stderr


def test_top_shows_every_node_the_job_cpu_of_the_busy_one_and_the_throughput(
        cluster: Cluster):
    """Node 1's worker spins between batches, the others sleep: `top` shows 3 nodes,
    node 1's job CPU at least 4x each other's, every node's samples/s
    (the Speedometer's), their sum as the cluster's, and no GPU (said in a note)."""
    # the job outlasts both waits below (up to 150 s on a loaded machine); stopped at the end
    started = do_train(str(cluster.spec), command=["python3", "top_job.py", "burn", "300"],
                       workdir_option=str(cluster.work), detach=True, rt=runtime())

    def busy_stands_out() -> dict | None:
        """A frame of this job with every node's rate, worker-1's job CPU 4x each other's."""
        frame = top_once(cluster)
        by_node = {n["node"]: n["job_cpu"] or 0 for n in frame["nodes"]}
        busy = by_node.get("worker-1", 0)
        complete = frame["job_id"] == started.job_id and len(frame["nodes"]) == 3 and all(
            n["samples_per_s"] for n in frame["nodes"])
        return frame if complete and busy > 0 and all(
            busy >= 4 * by_node.get(idle, busy) for idle in ("master", "worker-2")) else None

    try:
        frame = frame_with_rates(cluster, started.job_id)
        by_node = {n["node"]: n for n in frame["nodes"]}
        assert set(by_node) == {"master", "worker-1", "worker-2"}
        # a spinning process's share of a loaded machine varies from sample to sample:
        # the order must show within a minute of frames (each a fresh sample)
        try:
            frame = support.wait_for(busy_stands_out, "worker-1's job CPU at least 4x "
                                     "each other node's", 60, interval=1)
        except TimeoutError as late:
            raise AssertionError(f"{late}: {top_once(cluster)['nodes']}") from late
        rates = [n["samples_per_s"] for n in frame["nodes"]]
        assert frame["samples_per_s"] == pytest.approx(sum(rates))
        # every batch sleeps (or spins) PAUSE at least, so no node passes BATCH / PAUSE
        assert all(0 < r <= BATCH / PAUSE * 1.01 for r in rates), rates
        assert all(n["gpus"] == [] and n["gpu_util"] is None for n in frame["nodes"])
        assert "no GPU" in frame["note"]
    finally:
        stop(cluster, started.job_id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> dict[str, dict[str, float]] | None:
    """name -> {node (or node/label): value} of one scrape; None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = "/".join(s.labels.get(k, "") for k in ("node", "job_id", "kind", "mode")
                           if s.labels.get(k))
            found.setdefault(s.name, {})[key] = s.value
    return found


def test_top_serves_the_job_to_prometheus(cluster: Cluster, tmp_path: Path):
    """`top NAME --prometheus 127.0.0.1:PORT` (headless: no terminal) while a job runs:
    a scrape names the job and all 3 nodes, each up, with its job CPU, samples/s within
    the job's bounds, memory and CPU figures, its price and the job's cost so far, and
    every finding kind, and no GPU series (the sandbox has none); Ctrl-C ends it, exit 0. A host off loopback is refused in sandbox mode, exit 2, naming
    the option, before any node is dialled."""
    refused = cluster.cli("top", cluster.name, "--prometheus", "0.0.0.0:9101")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--prometheus 0.0.0.0:9101" in refused.stderr and "loopback" in refused.stderr
    # "steady": no node spins (this test reads figures, not an order of CPU shares)
    started = do_train(str(cluster.spec), command=["python3", "top_job.py", "steady", "300"],
                       workdir_option=str(cluster.work), detach=True, rt=runtime())
    url = f"http://127.0.0.1:{free_port()}/metrics"
    log = tmp_path / "top.err"
    with log.open("w") as err:
        server = subprocess.Popen([CLI, "top", cluster.name, "--prometheus",
                                   url.split("/")[2]], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=err, env=os.environ.copy())

    def every_node_rated() -> dict | None:
        if server.poll() is not None:
            raise AssertionError(f"top --prometheus ended ({server.returncode}): "
                                 f"{log.read_text()[-3000:]}")
        found = scrape(url)
        rates = (found or {}).get("clusterkit_samples_per_second", {})
        ours = started.job_id in (found or {}).get("clusterkit_job_info", {})
        return found if ours and len(rates) == 3 and all(rates.values()) else None

    try:
        found = support.wait_for(every_node_rated, "a scrape with every node's samples/s",
                                 120, interval=1)
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C: the server stops, exit 0
        server.wait(timeout=60)
        stop(cluster, started.job_id)
    nodes = {"master", "worker-1", "worker-2"}
    assert found["clusterkit_node_up"] == dict.fromkeys(nodes, 1.0)
    assert set(found["clusterkit_job_cpu_cores"]) == nodes
    assert all(v >= 0 for v in found["clusterkit_job_cpu_cores"].values())
    assert all(0 < r <= BATCH / PAUSE * 1.01 for r in
               found["clusterkit_samples_per_second"].values()), found
    assert all(v > 0 for v in found["clusterkit_node_memory_total_bytes"].values())
    assert all(0 <= v <= 1 for v in found["clusterkit_node_cpu_ratio"].values())
    assert len(found["clusterkit_node_cpu_ratio"]) == 3 * 4
    assert len(found["clusterkit_finding"]) == 3 * len(Kind)
    assert "clusterkit_gpu_utilization_ratio" not in found  # no GPU in the sandbox
    # priced at launch (the sandbox tags its nodes too); the job ran for less than an hour
    prices = found["clusterkit_node_price_dollars_per_hour"]
    assert set(prices) == nodes and all(p > 0 for p in prices.values())
    assert all(0 < found["clusterkit_job_cost_dollars"][n] < prices[n] for n in nodes)
    assert list(found["clusterkit_job_info"]) == [started.job_id]
    assert "clusterkit_job_cap_dollars" not in found  # no train.max_cost in this spec
    assert "serving" in log.read_text() and server.returncode == 0, log.read_text()


def test_a_slow_node_is_reported_as_a_straggler(cluster: Cluster):
    """Node 2's worker takes five times as long per batch (dist_async: the others go on
    at their pace): the diagnosis names worker-2 a straggler, with the numbers."""
    started = do_train(str(cluster.spec), command=["python3", "top_job.py", "straggler", "40"],
                       workdir_option=str(cluster.work), detach=True, rt=runtime())
    try:
        def straggler() -> dict | None:
            frame = top_once(cluster)
            found = [f for f in frame["findings"] if f["kind"] == "straggler"]
            return found[0] if found else None

        try:
            finding = support.wait_for(straggler, "a straggler finding", 90, interval=1)
        except TimeoutError as late:  # what top and the job's logs say, then
            frame = top_once(cluster)
            logs = cluster.cli("logs", cluster.name, "--job", started.job_id)
            raise AssertionError(json.dumps({"findings": frame["findings"], "rates": [
                (n["node"], n["samples_per_s"], n["job_cpu"]) for n in frame["nodes"]],
                "job": frame["job_id"], "started": started.job_id,
                "logs": logs.stdout[-3000:] + logs.stderr[-1000:]})) from late
        assert finding["nodes"] == [2], finding
        assert "samples/s" in finding["evidence"], finding
    finally:
        stop(cluster, started.job_id)


def test_a_finished_job_has_a_report_kept_on_the_master(cluster: Cluster):
    """`train` followed to the end prints the job's report and keeps it on the master:
    per node the wall time, the job's mean CPU (node 1 spun), samples in all (the
    Speedometer's rates over the run); `clusterkit job NAME --json` shows the same one
    again and lists the job."""
    # 20 s: the spinning outweighs every node's start-up (an MXNet import per process, three
    # on the master) in the run's mean even on a loaded machine (8 s did not, once)
    outcome = do_train(str(cluster.spec), command=["python3", "top_job.py", "burn", "20"],
                       workdir_option=str(cluster.work), rt=runtime())
    assert outcome.ok, outcome
    made = outcome.report
    assert made is not None and [n.name for n in made.nodes] == ["master", "worker-1",
                                                                  "worker-2"]
    assert all(n.wall_s > 0 and n.samples > 0 and n.gpus is None for n in made.nodes), made
    cpu = {n.name: n.cpu_mean for n in made.nodes}
    # the run's mean holds every node's start-up (an MXNet import each): an order, not a
    # ratio, survives a loaded machine
    assert cpu["worker-1"] > max(cpu["master"], cpu["worker-2"]), cpu
    run = cluster.cli("job", cluster.name, "--json")
    assert run.returncode == 0, run.stderr
    listing = json.loads(run.stdout)
    assert listing["job_id"] == outcome.job_id
    assert outcome.job_id in [j["job_id"] for j in listing["jobs"]]
    assert listing["report"] == json.loads(json.dumps(made.to_json()))


def test_scaling_runs_on_1_2_3_nodes_and_writes_the_table(cluster: Cluster, tmp_path: Path):
    """`clusterkit scaling --nodes 1,2,3`: three runs on the running cluster (nothing
    launched), three rows with the measured samples/s, and the CSV and a valid PNG."""
    run = cluster.cli("scaling", str(cluster.spec), "--nodes", "1,2,3", "--duration", "2s",
                      "--out", str(tmp_path), "--workdir", str(cluster.work), "--json",
                      "--", "python3", "top_job.py", "steady", "60", timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert [r["nodes"] for r in result["rows"]] == [1, 2, 3]
    assert all(r["samples_per_s"] and r["samples_per_s"] > 0 for r in result["rows"])
    assert result["rows"][0]["speedup"] == 1.0 and result["rows"][2]["speedup"] > 1.0
    table = (tmp_path / f"scaling-{cluster.name}.csv").read_text().splitlines()
    assert table[0].startswith("nodes,gpus,samples_per_s") and len(table) == 4
    assert (tmp_path / f"scaling-{cluster.name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(set(result["jobs"])) == 3 and not cluster.active()


def test_scaling_io_only_runs_the_input_pipeline_alone(cluster: Cluster, tmp_path: Path):
    """`--io-only`: every process gets CLUSTERKIT_IO_ONLY=1 (the script skips its
    kvstore) and the words of --io-args; the table and files say it is the input side."""
    run = cluster.cli("scaling", str(cluster.spec), "--nodes", "1,2", "--duration", "2s",
                      "--io-only", "--io-args", "60", "--out", str(tmp_path), "--workdir",
                      str(cluster.work), "--json", "--", "python3", "top_job.py", "steady",
                      timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["input_only"] and [r["nodes"] for r in result["rows"]] == [1, 2]
    assert all(r["samples_per_s"] > 0 for r in result["rows"])
    assert (tmp_path / f"scaling-{cluster.name}-io.csv").is_file()
    assert not cluster.active()


def test_scaling_fails_at_once_when_the_job_ends_without_a_throughput_line(
        cluster: Cluster, tmp_path: Path):
    """A job that prints no samples/s and ends: `scaling` fails as soon as it sees the
    end (not after --rate-wait: an hour here, past the command's own timeout), exit 1,
    naming train.throughput_pattern; nothing is left running and no table is written."""
    run = cluster.cli("scaling", str(cluster.spec), "--nodes", "1,2", "--duration", "10s",
                      "--rate-wait", "1h", "--out", str(tmp_path), "--workdir",
                      str(cluster.work), "--", "python3",
                      "-c", "'import time; print(\"no rate here\"); time.sleep(3)'",
                      timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    # the job's end is the cause (the wait would have run past the timeout above)
    assert "succeeded before every node printed a throughput" in run.stderr, run.stderr
    assert "train.throughput_pattern" in run.stderr and "Traceback" not in run.stderr
    assert "on 2 node(s)" not in run.stderr  # the first size failed: no second run
    assert not list(tmp_path.iterdir()) and not cluster.active()
