"""`train`, `logs`, `stop` end to end in the sandbox with real MXNet (CPU): a moto server,
a real sshd per node on loopback (each node its own root, sharing this machine's PID
space and cgroup mount), each node's supervisor, real ps-lite scheduler/servers/workers.
Nothing is mocked.

One 3-node c5.large cluster for the module (no EFS: the workdir goes to every node),
brought up once. The nodes see this machine's ``/`` (an overlay) but not ``/root``, where
the .venv's interpreter lives: the jobs run the system ``/usr/bin/python3`` (3.11, as the
.venv) with the .venv's site-packages (mxnet 1.9.1) on ``PYTHONPATH`` (``train.env``). Each test leaves no
job running (the last lines of each stop what it started)."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.nodejobs import node_jobs, open_job_cluster
from clusterkit.cluster.jobs.train import do_train
from clusterkit.errors import ClusterkitError
from clusterkit_sandbox.node import SHARED_IN_NODE
from clusterkit_sandbox.noderoot import SHOWN_READ_ONLY, SHOWN_TREES
from tests import support
from tests.e2e.clusters import running, sandbox_spec, shared_file, user_session
from tests.integration.conftest import Calls, runtime

CLI = str(Path(sys.executable).with_name("clusterkit"))
SECTIONS = """\
train:
  framework: mxnet
  python: /usr/bin/python3
  command: python3 dist_sync.py
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}}}
  packages: []
"""
# Every worker pushes rank+1; the dist_sync servers aggregate the round over the workers,
# so every worker must pull N(N+1)/2 in every element.
DIST_SYNC = textwrap.dedent("""\
    import mxnet as mx
    kv = mx.kv.create("dist_sync")
    shape = (4,)
    kv.init(0, mx.nd.zeros(shape))
    kv.push(0, mx.nd.ones(shape) * (kv.rank + 1))
    mx.nd.waitall()  # every push acknowledged: in dist_sync, once its round is merged
    kv._barrier()
    out = mx.nd.zeros(shape)
    kv.pull(0, out=out)
    mx.nd.waitall()
    print("RESULT", kv.rank, kv.num_workers, out.asnumpy().tolist(), flush=True)
""")
# Worker 1 fails once every worker has started (each marks the sandbox's shared
# directory, which every node sees), so the others are running when it does, and 3 s later: every
# node's supervisor has linked to the master by then. (A job that fails before a node
# linked leaves that node running until its heartbeat timeout: a known race, no job
# process can see the link to wait for it.)
FAIL_ON_1 = (f"m={SHARED_IN_NODE}/ck-$CLUSTERKIT_JOB_ID; "
             " touch $m-$CLUSTERKIT_NODE_RANK; "
             "if [ \"$CLUSTERKIT_NODE_RANK\" = 1 ]; then "
             "for _ in $(seq 600); do [ -e $m-0 ] && [ -e $m-2 ] && break; sleep 0.1; done; "
             "rm -f $m-0 $m-1 $m-2; sleep 3; echo about to fail; exit 3; fi; sleep 300")


@dataclass
class Cluster:
    name: str
    spec: Path
    work: Path

    def train(self, *command: str, **kwargs: object):
        return do_train(str(self.spec), command=command, workdir_option=str(self.work),
                        rt=runtime(), **kwargs)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=os.environ.copy())

    def active(self) -> list[str]:
        from clusterkit.cluster.jobs.nodejobs import active_jobs

        return active_jobs(node_jobs(open_job_cluster(runtime(), self.name)))


def new_cluster(where: Path, name: str, count: int) -> Cluster:
    """The spec of a ``count``-node c5.large cluster ``name`` in ``where``, and an empty
    workdir beside it."""
    spec = where / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=count, instance_type="c5.large",
                                 extra=SECTIONS.format(site=sysconfig.get_paths()["purelib"])))
    work = where / "work"
    work.mkdir()
    return Cluster(name, spec, work)


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("train")
    cl = new_cluster(where, support.unique_name("tr"), count=3)
    (cl.work / "dist_sync.py").write_text(DIST_SYNC)
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def job_processes(job_id: str) -> list[int]:
    """Every process on this machine (all sandbox nodes share its PID space) whose
    environment holds the job's id: what `stop` must leave none of."""
    needle = f"CLUSTERKIT_JOB_ID={job_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def all_gone(job_id: str) -> None:
    """Every process of the job ends: a failed job's servers may still be taking their
    grace to die when `train` returns (the next `train` waits for them), so this polls,
    with a deadline well past that grace."""
    support.wait_for(lambda: job_processes(job_id) == [], f"no process of {job_id} left",
                     60, interval=0.2)


def test_three_node_dist_sync_aggregates_on_every_worker(cluster: Cluster):
    out = io.StringIO()
    outcome = cluster.train(out=out)
    text = out.getvalue()
    assert outcome.state == "succeeded", text
    results = re.findall(r"^\[(\S+)/worker-0\] RESULT (\d) 3 (\[.*\])$", text, re.M)
    assert sorted(node for node, _, _ in results) == ["master", "worker-1", "worker-2"], text
    assert sorted(rank for _, rank, _ in results) == ["0", "1", "2"]
    assert {values for _, _, values in results} == {str([1.0 + 2.0 + 3.0] * 4)}
    all_gone(outcome.job_id)  # scheduler and servers stopped too
    assert cluster.active() == []


def test_worker_exit_3_stops_everything_at_once_naming_node_and_role(cluster: Cluster):
    """The others' 300 s sleeps are stopped, not waited for: train returns long before
    they would end, after the failed worker's exit was recorded."""
    out = io.StringIO()
    started = time.time()
    outcome = cluster.train(FAIL_ON_1, out=out)
    returned = time.time()
    assert outcome.state == "failed", out.getvalue()
    assert outcome.failed is not None
    assert (outcome.failed.node, outcome.failed.role, outcome.failed.exit) == \
        ("worker-1", "worker", 3)
    assert "about to fail" in outcome.failed.tail
    d = f"/var/lib/clusterkit/jobs/{outcome.job_id}"
    (res,) = do_exec(cluster.name, [f"stat -c %Y {d}/worker-0.exit"], nodes=["worker-1"],
                     rt=runtime()).values()
    assert int(started) <= int(res.stdout) <= returned
    assert returned - started < 150  # a generous bound, half the sleeps it must not wait for
    all_gone(outcome.job_id)


def test_detached_failure_is_seen_by_logs_follow(cluster: Cluster):
    proc = cluster.cli("train", str(cluster.spec), "--detach", "--workdir", str(cluster.work),
                       "--", FAIL_ON_1)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().splitlines()[-1]
    assert re.match(r"^j-\d{8}-\d{6}-[0-9a-f]{4}$", job_id)
    logs = cluster.cli("logs", cluster.name, "-f", timeout=60)
    assert logs.returncode == 1, logs.stdout + logs.stderr
    assert "[worker-1/worker-0] about to fail" in logs.stdout
    assert "worker worker-0 on worker-1 exited with 3" in logs.stderr
    all_gone(job_id)
    status = cluster.cli("status", cluster.name)
    assert status.returncode == 0, status.stderr
    assert f"job {job_id}: failed" in status.stdout
    assert "worker-0 exited 3" in status.stdout


def test_refuses_a_second_job_then_replace_and_stop_leave_nothing(cluster: Cluster):
    escape = "setsid bash -c 'sleep 1000' </dev/null >/dev/null 2>&1 & sleep 300"
    first = cluster.train(escape, detach=True)
    with pytest.raises(ClusterkitError, match="is running on cluster"):
        cluster.train(detach=True)
    second = cluster.train(escape, detach=True, replace=True)
    all_gone(first.job_id)
    deadline = time.time() + 20
    while len(job_processes(second.job_id)) < 9 and time.time() < deadline:
        time.sleep(0.2)  # scheduler, 3 servers, 3 workers, and the escaped sleeps
    assert len(job_processes(second.job_id)) >= 7
    stop = cluster.cli("stop", cluster.name)
    assert stop.returncode == 0, stop.stderr
    all_gone(second.job_id)
    assert cluster.active() == []
    # a job right after a killed one completes
    assert cluster.train(out=io.StringIO()).state == "succeeded"


def test_logs_follow_reattaches_after_the_client_is_killed(cluster: Cluster, sandbox):
    """The job goes on after its client is killed: every worker waits for a file (in
    the sandbox's shared directory, which the nodes see) made once `logs -f` shows all
    three began, then ends; `logs -f` follows it to the end."""
    go, go_in_node = shared_file(sandbox.dir, f"ck-reattach-{support.unique_name('go')}")
    command = (f"echo ck-began; for _ in $(seq 600); do [ -e {go_in_node} ] && break; "
               "sleep 0.1; "
               "done; echo done-ok")
    client = subprocess.Popen([CLI, "train", str(cluster.spec), "--workdir", str(cluster.work),
                               "--", command],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert client.stdout is not None
    for line in client.stdout:
        if "ck-began" in line:
            break
    client.kill()
    client.wait(10)
    logs = subprocess.Popen([CLI, "logs", cluster.name, "-f"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=os.environ.copy())
    try:
        assert logs.stdout is not None
        seen = 0
        for line in logs.stdout:
            seen += "ck-began" in line
            if seen == 3:
                break
        go.touch()
        rest, err = logs.communicate(timeout=60)
    finally:
        go.unlink(missing_ok=True)
        if logs.poll() is None:
            logs.kill()
    assert logs.returncode == 0, rest + err
    assert rest.count("done-ok") == 3
    assert cluster.active() == []


def test_train_starts_on_the_kept_nodes_without_aws_and_asks_aws_when_they_do_not_hold(
        cluster: Cluster):
    """`up` kept the node list; `train` uses it without one AWS call, and goes to AWS
    (and keeps the right list again) when the master's hosts block names other nodes."""
    from clusterkit.cluster.access import nodecache

    kept = nodecache.load(cluster.name)
    assert kept is not None and sorted(n.index for n in kept) == [0, 1, 2]
    calls, events = Calls(), []
    rt = runtime(calls)
    rt.report = events.append

    def train() -> None:
        calls.reset()
        events.clear()
        outcome = do_train(str(cluster.spec), command=("echo kept-ok",), rt=rt,
                           workdir_option=str(cluster.work), out=io.StringIO())
        assert outcome.state == "succeeded"

    train()
    assert calls.log == []
    one, two = (next(n for n in kept if n.index == i) for i in (1, 2))
    for wrong in ([n for n in kept if n.index != 2],  # a node fewer than the cluster has
                  [n for n in kept if n.index == 0]  # two nodes at each other's address
                  + [dataclasses.replace(one, index=2), dataclasses.replace(two, index=1)]):
        nodecache.save(cluster.name, wrong)
        train()
        assert ("ec2", "DescribeInstances") in calls.log
        assert any("asking AWS" in e.text for e in events), [e.text for e in events]
        assert identities(nodecache.load(cluster.name) or []) == identities(kept)


def identities(nodes: list) -> list[tuple]:
    """What a kept node is dialled and checked by (its tags may be older: `up` keeps
    the nodes it described before writing their role tags)."""
    return sorted((n.index, n.instance_id, n.instance_type, n.public_ip, n.private_ip)
                  for n in nodes)


TORCH_SECTIONS = """\
train:
  framework: torchrun
  python: /usr/bin/python3
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}, GLOO_SOCKET_IFNAME: lo}}
  packages: []
"""
DDP_EXAMPLE = Path(__file__).parents[2] / "examples" / "torchrun_ddp.py"


def torch_spec(cluster: Cluster, count: int) -> Path:
    """A spec of ``cluster`` (the same name and nodes) whose jobs run torchrun. The
    nodes run the system python3 with the torch venv's site-packages (scripts/install.sh
    puts it in /var/cache/clusterkit, which the nodes see read-only) on PYTHONPATH."""
    site = subprocess.run([support.torch_python(), "-c", "import sysconfig; print(sysconfig."
                           "get_paths()['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert site.startswith(tuple(f"/{d}/" for d in (*SHOWN_TREES, *SHOWN_READ_ONLY))), (
        f"torch's site-packages {site} lie outside what the nodes see of this machine")
    spec = cluster.spec.with_name(f"{cluster.name}-torch.yaml")
    spec.write_text(sandbox_spec(cluster.name, count=count, instance_type="c5.large",
                                 extra=TORCH_SECTIONS.format(site=site)))
    return spec


def ddp_ranks(cluster: Cluster, count: int) -> dict[str, str]:
    """examples/torchrun_ddp.py run by `clusterkit train` with torchrun on the cluster's
    ``count`` nodes (one process each, gloo): node -> the line its rank printed."""
    spec = torch_spec(cluster, count)
    (cluster.work / DDP_EXAMPLE.name).write_text(DDP_EXAMPLE.read_text())
    proc = cluster.cli("train", str(spec), "--workdir", str(cluster.work), "--", "python3",
                       DDP_EXAMPLE.name, "--steps", "5", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cluster.active() == []
    return dict(re.findall(r"^\[(\S+?)/\S+\] (ddp rank \d+/\d+ .*)$", proc.stdout, re.M))


@pytest.mark.torch  # torch on the nodes: scripts/install.sh's interpreter
def test_the_torchrun_ddp_example_trains_one_model_on_three_nodes(cluster: Cluster):
    """Every rank, one per node, ends with the parameters of every other (the script
    gathers and compares them) and the right all_reduce sum: it prints OK."""
    said = ddp_ranks(cluster, 3)
    assert sorted(said) == ["master", "worker-1", "worker-2"], said
    ranks = sorted(re.match(r"ddp rank (\d+)/3 gloo on cpu: .* OK$", line).group(1)
                   for line in said.values())
    assert ranks == ["0", "1", "2"], said


@pytest.mark.torch  # torch on the nodes: scripts/install.sh's interpreter
def test_nccl_test_on_every_node(cluster: Cluster):
    """`train --nccl-test` on this module's 3 nodes, through the CLI: torchrun and gloo
    (the sandbox has no GPU and no EFA), one rank per node, every size from 8 B to the
    CPU default of 4 MiB printed with its bus bandwidth, c5.large's 10 Gbit/s as the
    nominal figure, and a verdict that 4 MiB is too small to judge."""
    spec = torch_spec(cluster, 3)
    proc = cluster.cli("train", str(spec), "--nccl-test")  # ~13-15 s here
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["all-reduce test: 3 x c5.large, 3 rank(s), float32 sum",
                         "      size   bus bandwidth"]
    sizes = [line.split(" GB/s")[0].rsplit(None, 1)[0].strip() for line in lines[2:22]]
    assert sizes[0] == "8 B" and sizes[-1] == "4 MiB" and len(sizes) == 20, proc.stdout
    assert lines[22].startswith("peak: ") and "[transport]" not in proc.stdout
    assert lines[23] == "nominal: 1.25 GB/s (10 Gbit/s, c5.large network, no EFA)"
    assert lines[24].startswith("verdict: cannot judge the bandwidth: no message of 128 MiB")
    assert cluster.active() == []
