"""cluster/jobs/nccltest.py (`train SPEC --nccl-test`) without a cluster: the job it
starts (torchrun, one process per GPU, the script shipped in the job's directory), the
nominal figure it weighs against, the master's table kept apart from NCCL's lines, and
the whole command with SSH replaced by the script's own table. The sandbox run is
tests/e2e/test_train.py::test_nccl_test_on_every_node (needs torch)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from clusterkit.cluster.jobs import attempt, nccltest
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.errors import UsageError
from clusterkit.kinds import Market
from clusterkit.node import nccl_allreduce as script
from clusterkit.node.jobstate import JobStateName
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Login
from clusterkit.spec import loads
from clusterkit.training import jobfiles
from clusterkit.training.allreduce import Looks

SPEC = """\
name: c1
region: us-east-1
nodes: {{count: 2, instance_types: [{type}]}}
network: {{efa: '{efa}'}}
train:
  framework: mxnet
  python: /opt/torch/bin/python
  command: python3 train.py
  workers_per_node: 2
  env: {{FI_PROVIDER: efa}}
"""


def cluster(type_name: str = "c5.large", efa: str = "auto") -> JobCluster:
    spec = loads(SPEC.format(type=type_name, efa=efa))
    nodes = [Node(f"i-{i}", i, "running", type_name, "us-east-1a", Market.ON_DEMAND,
                  "us-east-1") for i in range(2)]
    return JobCluster("c1", spec, Login("c1"), nodes, [])


def test_the_test_runs_under_torchrun_one_process_per_gpu_with_the_specs_python_and_env():
    spec = nccltest.nccl_spec(cluster().spec)
    assert spec.train is not None
    assert (spec.train.framework, spec.train.workers_per_node, spec.train.command) == \
        ("torchrun", 0, None)
    assert spec.train.python == "/opt/torch/bin/python"
    assert dict(spec.train.env) == {"FI_PROVIDER": "efa"}


def test_the_command_names_the_script_and_the_largest_size():
    assert nccltest.nccl_command(None) == "python3 nccl_allreduce.py"
    assert nccltest.nccl_command(1 << 30) == "python3 nccl_allreduce.py --max-bytes 1073741824"
    for bad in (4, 16 << 30):
        with pytest.raises(UsageError, match="--nccl-max-bytes"):
            nccltest.nccl_command(bad)


@pytest.mark.parametrize(("type_name", "efa", "expected"), [
    ("p4d.24xlarge", "auto", (True, 400.0)),  # EFA's 4 x 100 Gbit/s
    ("p4d.24xlarge", "false", (False, 400.0)),  # the type's network figure, no EFA
    ("p5.48xlarge", "true", (True, 3200.0)),
    ("c5.large", "auto", (False, 10.0)),  # the sandbox's type
    ("no.such-type", "auto", (False, 0.0)),
])
def test_nominal_is_efas_bandwidth_with_efa_else_the_types(type_name, efa, expected):
    spec = cluster("p4d.24xlarge", efa).spec
    assert nccltest.nominal_of(spec, type_name) == expected


def test_rank_0s_table_is_kept_from_any_node_and_nccls_lines_are_not():
    """c10d's rendezvous ranks nodes by their address (``--local-addr``), as strings:
    127.1.0.10 before 127.1.0.9, so rank 0, the one that prints, may be a worker."""
    kept: list[str] = []
    seen: list[tuple[str, str]] = []
    keep = nccltest.table_keeper(kept, SimpleNamespace(
        add=lambda node, text: seen.append((node, text))))  # type: ignore[arg-type]
    keep("worker-1", "#  Rank  0 Group  0 Pid 1 on h device  0 [cpu] CPU")
    keep("master", "h:1:1 [0] NCCL INFO Using network Socket")
    keep("worker-1", "        8    2  float  sum  -1 ...")
    assert kept == ["#  Rank  0 Group  0 Pid 1 on h device  0 [cpu] CPU",
                    "        8    2  float  sum  -1 ..."]
    assert len(seen) == 3  # the transport watcher sees every line


def table(ranks: int, max_bytes: int, seconds: float) -> list[str]:
    """The script's lines for sizes 8 B..max_bytes, each call taking ``seconds``."""
    hosts = [(1, "h", 0, "cpu", "CPU")] * ranks
    rows = [script.row(size, ranks, [(seconds, 0), (seconds, 0)])
            for size in script.sizes(8, max_bytes)]
    return [*script.header(8, max_bytes, 1, 5, "gloo", hosts), *rows,
            *script.footer([1.0], 0)]


@pytest.fixture()
def started(monkeypatch):
    """do_nccl_test with SSH replaced: the cluster given, the nodes ready, the start
    recorded, and the follow fed ``lines`` from the master (set by the test)."""
    record: dict = {"lines": [], "jc": cluster()}
    ready = attempt.Ready({}, [20001, 20002, 20003], "/home/u", "", None)
    monkeypatch.setattr(jobs, "open_job_cluster", lambda *a, **k: record["jc"])
    monkeypatch.setattr(attempt, "ready_cluster", lambda rt, stack, jc, wd, reopen: (jc, ready))
    monkeypatch.setattr(attempt, "refuse_running", lambda *a: None)

    def start(rt, jc, spec, command, job_id, cwd, ports, sync=None, restart=None, extra=None):
        record.update(spec=spec, command=command, job_id=job_id, cwd=cwd, extra=extra)

    def follow_logs(jc, job_id, *, on_line, stop, **_):
        for line in ["h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>", *record["lines"]]:
            on_line("master", line)
        final = jobfiles.state_of({"job_id": job_id, "state": "succeeded"})
        return SimpleNamespace(states={"master": final}, tails={}, totals={})

    monkeypatch.setattr(attempt, "start", start)
    monkeypatch.setattr(jobs, "follow_logs", follow_logs)
    return record


RT = SimpleNamespace(started=lambda *a, **k: None, done=lambda *a, **k: None)


def test_do_nccl_test_starts_the_script_in_the_job_dir_and_reads_its_table(started):
    started["lines"] = table(2, 4 << 20, 2e-3)
    found = nccltest.do_nccl_test("c1.yaml", max_bytes=4 << 20, out=io.StringIO(),
                                  rt=RT)  # type: ignore[arg-type]
    assert started["command"] == f"python3 nccl_allreduce.py --max-bytes {4 << 20}"
    assert started["cwd"] == f"/var/lib/clusterkit/jobs/{started['job_id']}"
    assert set(started["extra"]) == {"nccl_allreduce.py"}
    assert "def main(" in started["extra"]["nccl_allreduce.py"]
    assert started["spec"].train.framework == "torchrun"
    assert found.outcome.state is JobStateName.SUCCEEDED
    assert len(found.result.rows) == 20 and found.result.peak_busbw_gbs == 2.10
    assert (found.instance_type, found.nodes, found.efa, found.nominal_gbps) == \
        ("c5.large", 2, False, 10.0)
    # 4 MiB is too small to judge: the verdict says so and how to test larger messages
    assert found.verdict.looks is Looks.UNKNOWN and "--nccl-max-bytes 1G" in \
        found.verdict.summary
    assert found.to_json()["rows"][-1] == {"size_bytes": 4 << 20, "busbw_gbs": 2.1,
                                           "out_of_place_us": 2000.0, "in_place_us": 2000.0}


def test_do_nccl_test_on_p4d_weighs_the_peak_against_efa(started):
    started["jc"] = cluster("p4d.24xlarge")
    started["lines"] = table(16, 256 << 20, 10e-3)  # 256 MiB in 10 ms on 16 ranks
    found = nccltest.do_nccl_test("c1.yaml", out=io.StringIO(), rt=RT)  # type: ignore[arg-type]
    assert started["command"] == "python3 nccl_allreduce.py"
    assert found.efa and found.nominal_gbps == 400.0
    assert found.verdict.looks is Looks.EFA and found.result.peak_busbw_gbs == 50.33
