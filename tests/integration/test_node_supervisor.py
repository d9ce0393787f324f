"""The node supervisor with real processes, cgroups and sockets, all on this machine:
each "node" is a job dir of its own under a temp CLUSTERKIT_ROOT, its supervisor a real
daemon (python3 <job dir>/supervisor.py start), the coordinator on 127.0.0.1. Needs
root (cgroup v2 directories); fails instead of skipping under CI=true."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from clusterkit.bootstrap import efa
from tests.integration.supervisor_jobs import (
    MARKER,
    SLEEP,
    Job,
    Node,
    build_job,
    cgroup_dirs,
    efa_profile,
    free_port,
    kill_supervisor,
    ps_node,
    until_file,
)
from tests.support import wait_for

pytestmark = pytest.mark.root


@pytest.fixture
def make_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CLUSTERKIT_NO_CGROUP", raising=False)
    jobs: list[Job] = []

    def make(node_procs: list[list[dict]], grace: float = 1, hb: float = 10,
             port: int | None = None, extra: list[dict] | None = None) -> Job:
        job = build_job(tmp_path, node_procs, grace, hb, port, extra)
        jobs.append(job)
        return job

    yield make
    for job in jobs:  # whatever a failed assertion left behind
        job.stop_all()
        for pid in job.leftovers():
            os.kill(pid, signal.SIGKILL)


def test_workers_exit_0_then_servers_stop_and_every_node_succeeds(make_job,
                                                                  tmp_path: Path) -> None:
    go = tmp_path / "go"  # node 0's worker, and so the job, ends once the test has looked
    job = make_job([ps_node(f"{until_file(go)}; echo hi $CLUSTERKIT_JOB_ID") + [
        {"name": "scheduler", "role": "scheduler", "cmd": SLEEP}],
        ps_node("sleep 0.5"), ps_node("true")])
    job.start()
    wait_for(lambda: cgroup_dirs(job) and len(cgroup_dirs(job)) == 3, "3 cgroups")
    group = cgroup_dirs(job)[0]
    pid0 = int((job.nodes[0].dir / "server-0.pid").read_text().split()[0])
    assert str(pid0) in (group.parent / f"cktest-0-{job.id}" / "cgroup.procs").read_text()
    assert os.getpgid(pid0) == pid0  # a process group of its own
    env = dict(e.split("=", 1) for e in
               Path(f"/proc/{pid0}/environ").read_text().split("\0") if e)
    shell_own = {"SHLVL", "PWD", "_"}  # what bash itself exports
    assert set(env) - shell_own == {"PATH", "HOME", "LANG", "SECRET_THING", "CK_TEST_NODE",
                                    "CLUSTERKIT_JOB_ID", "CLUSTERKIT_NODE_RANK"}
    assert env["CLUSTERKIT_NODE_RANK"] == "0"
    go.touch()
    waited = job.master.cli("wait", "--timeout", "20")
    assert waited.returncode == 0, waited.stdout
    states = job.wait_final()
    assert [s["state"] for s in states] == ["succeeded"] * 3, states
    again = job.nodes[1].cli("start")
    assert again.returncode == 1 and "already started" in again.stderr
    assert all(s["processes"]["worker-0"]["exit"] == 0 for s in states)
    assert states[0]["processes"]["scheduler"]["exit"] == -signal.SIGTERM
    assert (job.nodes[2].dir / "server-0.exit").read_text().strip() == "-15"
    assert (job.nodes[1].dir / "worker-0.exit").read_text().strip() == "0"
    assert (job.nodes[0].dir / "worker-0.log").read_text() == f"hi {job.id}\n"
    assert cgroup_dirs(job) == []
    assert job.leftovers() == []


def test_a_worker_exiting_3_stops_every_process_on_every_node(make_job,
                                                              tmp_path: Path) -> None:
    """How soon: bench/bench_supervisor.py (failure -> every node final)."""
    go = tmp_path / "go"
    job = make_job([ps_node(SLEEP), ps_node(f"{until_file(go)}; exit 3"), ps_node(SLEEP)],
                   grace=2)
    started = time.time()
    job.start()
    assert job.nodes[2].cli("wait", "--timeout", "0.5").returncode == 124  # nothing ended
    go.touch()
    exit_file = job.nodes[1].dir / "worker-0.exit"
    wait_for(exit_file.exists, "worker-0 on node 1 ends", 10)
    # not the file's mtime: the kernel stamps files from a coarse clock, up to a tick behind time.time()
    seen_ended = time.time()
    states = job.wait_final(20)
    master = states[0]
    assert master["state"] == "failed"
    assert master["failed"] == {"node": 1, "process": "worker-0", "exit": 3, "signal": None,
                                "time": master["failed"]["time"]}
    assert started < master["failed"]["time"] <= seen_ended  # when it ended, before we saw its file
    assert {(f["node"], f["process"]) for f in master["others"]} <= {
        (0, "scheduler"), (0, "worker-0"), (1, "server-0"), (2, "server-0"), (2, "worker-0")}
    assert "node 1 worker-0 exited with 3" in master["reason"]
    assert [s["state"] for s in states] == ["failed"] * 3
    assert job.leftovers() == []
    assert cgroup_dirs(job) == []
    assert job.nodes[2].cli("wait").returncode == 1


def test_every_process_gets_the_nodes_efa_profile_and_its_own_keys_win(make_job,
                                                                       tmp_path: Path) -> None:
    """The node's EFA profile (what the bootstrap's efa step writes; here under the
    node's temp root: this machine, like the sandbox's nodes, has no EFA) reaches every
    process of the job on that node; a key the job sets itself (train.env) wins over it;
    a node without the file gets nothing from it."""
    show = 'echo "efa=${FI_PROVIDER:-} rdma=${FI_EFA_USE_DEVICE_RDMA:-}"'
    job = make_job([[{"name": "server-0", "role": "server", "cmd": f"{show}; {SLEEP}"},
                     {"name": "worker-0", "role": "worker", "cmd": show}],
                    [{"name": "worker-0", "role": "worker", "cmd": show}]])
    profile = efa_profile(tmp_path, 0)  # make_job builds the job under tmp_path
    profile.parent.mkdir(parents=True)
    profile.write_text(efa.profile_text({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                                         "FI_EFA_FORK_SAFE": "1"}))
    spec = json.loads((job.master.dir / "job.json").read_text())
    spec["processes"][1]["env"]["FI_EFA_USE_DEVICE_RDMA"] = "0"  # the user's train.env
    (job.master.dir / "job.json").write_text(json.dumps(spec))
    job.start()
    states = job.wait_final(20)
    assert [s["state"] for s in states] == ["succeeded"] * 2, states
    logs = {(n.index, name): (n.dir / f"{name}.log").read_text().strip()
            for n in job.nodes for name in ("server-0", "worker-0")
            if (n.dir / f"{name}.log").exists()}
    assert logs == {(0, "server-0"): "efa=efa rdma=1", (0, "worker-0"): "efa=efa rdma=0",
                    (1, "worker-0"): "efa= rdma="}
    assert f"{profile}: FI_EFA_FORK_SAFE, FI_EFA_USE_DEVICE_RDMA, FI_PROVIDER" in \
        job.master.log()


def test_a_process_that_cannot_start_fails_the_job(make_job, tmp_path: Path) -> None:
    job = make_job([ps_node(SLEEP)])
    spec = json.loads((job.master.dir / "job.json").read_text())
    spec["processes"][1]["cwd"] = str(tmp_path / "missing")
    (job.master.dir / "job.json").write_text(json.dumps(spec))
    job.start()
    [state] = job.wait_final(15)
    assert {k: state["failed"][k] for k in ("node", "process", "exit", "signal")} == {
        "node": 0, "process": "worker-0", "exit": 127, "signal": None}
    assert "cannot start worker-0" in (job.master.dir / "worker-0.log").read_text()
    assert job.leftovers() == []


ESCAPE = "setsid sh -c 'trap \"\" TERM; sleep 1000 &'; exec sleep 1000"  # ignores SIGTERM too


def _sessions(pids: list[int]) -> set[int]:
    return {int(Path(f"/proc/{p}/stat").read_bytes().rsplit(b")", 1)[1].split()[3])
            for p in pids}


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup", "no-cgroup"])
def test_stop_ends_escaped_processes_and_is_idempotent(make_job, monkeypatch,
                                                       cgroups: bool) -> None:
    if not cgroups:
        monkeypatch.setenv("CLUSTERKIT_NO_CGROUP", "1")
    job = make_job([ps_node(ESCAPE), ps_node(ESCAPE)], grace=1, hb=5)
    job.start()
    # 2 nodes x (server, worker, escaped sleep)
    def sleepers() -> list[int]:
        return [p for p in job.leftovers() if _comm(p) == "sleep"]

    pids = wait_for(lambda: (found := sleepers()) and len(found) == 6 and found, "6 sleeps")
    assert len(_sessions(pids)) == 6  # each its own session, the escapee too
    assert bool(cgroup_dirs(job)) is cgroups
    status = json.loads(job.master.cli("status").stdout)
    assert status["state"] == "running" and status["supervisor"] == "running"
    assert status["processes"]["worker-0"]["state"] == "running"
    for pid in filter(str.isdigit, os.listdir("/proc")):  # no secret on a command line
        try:
            assert MARKER.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
    assert len([p for p in pids if _on_node(1, p)]) == 3
    out = job.nodes[1].cli("stop", "--grace", "1")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "stopped"
    assert [p for p in job.leftovers() if _on_node(1, p)] == []  # stop waited
    for node in job.nodes:
        again = node.cli("stop")
        assert again.returncode == 0 and json.loads(again.stdout)["state"] == "stopped"
    assert job.leftovers() == []
    assert cgroup_dirs(job) == []
    assert job.master.state()["reason"] == "stopped on request on node 1"
    assert all(MARKER not in p.read_text() for n in job.nodes for p in n.dir.glob("*.log"))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _on_node(index: int, pid: int) -> bool:
    try:
        return f"CK_TEST_NODE={index}".encode() in \
            Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _node_pids(node: Node) -> list[int]:
    return [int((node.dir / f"{n}.pid").read_text().split()[0])
            for n in ("server-0", "worker-0")]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_a_worker_node_that_loses_the_master_stops_its_processes(make_job) -> None:
    # hb 6, not 2: both supervisors must link within it of their start (a loaded machine)
    job = make_job([ps_node(SLEEP), ps_node(SLEEP)], grace=1, hb=6)
    job.start()
    job.wait_linked(30)
    kill_supervisor(job.master)  # how soon node 1 gives up: bench/bench_supervisor.py
    wait_for(lambda: job.nodes[1].state().get("state") == "failed", "node 1 gives up", 30)
    assert "lost the master" in job.nodes[1].state()["reason"]
    wait_for(lambda: not any(map(_alive, _node_pids(job.nodes[1]))), "node 1 empty", 15)
    assert all(map(_alive, _node_pids(job.master)))  # its own supervisor is gone
    out = job.master.cli("stop", "--grace", "1")  # stop without a daemon: from the files
    assert out.returncode == 0, out.stderr
    assert job.leftovers() == [] and cgroup_dirs(job) == []


def test_a_master_that_stops_hearing_a_node_fails_the_job(make_job) -> None:
    # hb: the master counts a node's silence from its own start until the node's hello,
    # so the three supervisors must all start within it: 2 s did not hold on a loaded
    # machine (the master failed the job before node 2 linked)
    job = make_job([ps_node(SLEEP), ps_node(SLEEP), ps_node(SLEEP)], grace=1, hb=6)
    job.start()
    job.wait_linked(30)
    kill_supervisor(job.nodes[2])
    states = job.wait_final(30, count=2)
    assert states[0]["state"] == "failed"
    assert states[0]["reason"] == "node 2 stopped answering"
    assert {k: states[0]["failed"][k] for k in ("node", "process", "exit", "signal")} == {
        "node": 2, "process": None, "exit": None, "signal": None}
    assert states[1]["state"] == "failed"
    assert not any(map(_alive, _node_pids(job.nodes[0]) + _node_pids(job.nodes[1])))
    assert job.nodes[2].cli("stop", "--grace", "1").returncode == 0
    assert job.leftovers() == []


def test_a_job_right_after_a_killed_one_on_the_same_port_completes(make_job) -> None:
    port = free_port()
    first = make_job([ps_node(SLEEP), ps_node(SLEEP)], port=port)
    first.start()
    first.wait_linked()  # the port has a live link when the supervisors die
    for node in first.nodes:
        kill_supervisor(node)
        assert node.cli("stop", "--grace", "0").returncode == 0
    assert first.leftovers() == []
    second = make_job([ps_node("true"), ps_node("sleep 0.5")], port=port)
    second.start()
    assert [s["state"] for s in second.wait_final(15)] == ["succeeded", "succeeded"]


def test_the_coordinator_drops_a_peer_without_the_token(make_job) -> None:
    job = make_job([ps_node(SLEEP), ps_node(SLEEP)], hb=5)
    job.start()
    port = json.loads((job.master.dir / "job.json").read_text())["coordinator"]["port"]
    wait_for(lambda: job.master.state().get("state") == "running", "master running")
    bad = {"t": "hello", "token": "nope", "node": 1}
    assert _stranger(port, bad) == b""  # closed without a word
    assert _stranger(port, bad, {"t": "stop"}) == b""  # dropped, its stop unheard
    # A later stranger is dropped in a later pass of the master's loop: the pass that read
    # that stop is over, and a stop it had heard would be in state.json by now.
    assert _stranger(port, bad) == b""
    assert job.master.state()["state"] == "running"


def _stranger(port: int, *msgs: dict) -> bytes:
    """What the coordinator answers a peer that sends ``msgs``: b"" once it hangs up
    (a reset, when it hung up on bytes it never read, too; a socket timeout, if it never
    does, fails the test)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
        try:
            return s.recv(100)
        except ConnectionResetError:
            return b""


# A process that checkpoints on SIGUSR1 and ends on SIGTERM, saying each in its log.
CHECKPOINTS = ("trap 'echo checkpoint' USR1; trap 'echo term; exit 0' TERM; "
               "while :; do sleep 0.05; done")


def test_an_interruption_notice_checkpoints_every_process_then_stops_the_job(
        make_job, tmp_path: Path) -> None:
    """Node 1's instance metadata posts a spot interruption notice (the fake service on
    loopback, as EC2 posts it): every worker on every node gets the checkpoint signal
    (MXNet's servers, which would die of it, do not), SIGTERM only after the job's
    checkpoint grace, and the job ends interrupted, naming node 1; node 1's state
    records the notice, the master's the interruption the job ended on."""
    from clusterkit.node import interruption
    from tests.fake_imds import fake_imds

    with fake_imds() as (endpoint, served):
        procs = [{"name": "server-0", "role": "server", "cmd": CHECKPOINTS},
                 {"name": "worker-0", "role": "worker", "cmd": CHECKPOINTS}]
        job = make_job([procs, procs], grace=2, extra=[
            {"checkpoint_grace": 1.5}, {"checkpoint_grace": 1.5, "imds": endpoint}])
        job.start()
        job.wait_linked()
        wait_for(lambda: any(c == "GET" for c, _p, _s in served.log), "node 1 watching", 10)
        soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))
        served.documents[interruption.ACTION_PATH] = (
            f'{{"action": "terminate", "time": "{soon}"}}')
        states = job.wait_final(30)
    assert [s["state"] for s in states] == ["interrupted"] * 2
    assert all("node 1: spot interruption notice (terminate at" in s["reason"]
               for s in states), states
    assert states[0]["notices"] == []
    assert [n["kind"] for n in states[1]["notices"]] == ["interruption"]
    interrupted = states[0]["interruption"]
    assert (interrupted["node"], interrupted["kind"], interrupted["action"]) == (
        1, "interruption", "terminate")
    assert interrupted["seen"] <= states[0]["updated"]
    assert all(s["started"] <= interrupted["seen"] for s in states)
    for node in job.nodes:
        for name, want in (("server-0", ["term"]), ("worker-0", ["checkpoint", "term"])):
            said = [line for line in (node.dir / f"{name}.log").read_text().splitlines()
                    if line in ("checkpoint", "term")]  # (bash also says its sleep died)
            assert said == want, (node.index, name, said)
            assert (node.dir / f"{name}.exit").read_text().strip() == "0"
    assert "sent SIGUSR1 to every process but a launcher, scheduler or server" in \
        job.master.log()
    assert job.leftovers() == []


def test_once_every_worker_saved_and_exited_the_servers_do_not_wait_out_the_grace(
        make_job, tmp_path: Path) -> None:
    """The notice's checkpoint grace is 60 s here; the workers save and exit at once on
    the checkpoint signal, so each node's servers get SIGTERM then, and the job ends
    interrupted well inside the 30 s this test waits (not after the grace)."""
    from clusterkit.node import interruption
    from tests.fake_imds import fake_imds

    saves = "trap 'echo checkpoint; exit 0' USR1; while :; do sleep 0.05; done"
    with fake_imds() as (endpoint, served):
        procs = [{"name": "server-0", "role": "server", "cmd": CHECKPOINTS},
                 {"name": "worker-0", "role": "worker", "cmd": saves}]
        job = make_job([procs, procs], grace=2, extra=[
            {"checkpoint_grace": 60}, {"checkpoint_grace": 60, "imds": endpoint}])
        job.start()
        job.wait_linked()
        wait_for(lambda: any(c == "GET" for c, _p, _s in served.log), "node 1 watching", 10)
        later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
        served.documents[interruption.ACTION_PATH] = (
            f'{{"action": "terminate", "time": "{later}"}}')
        states = job.wait_final(30)
    assert [s["state"] for s in states] == ["interrupted"] * 2
    for node in job.nodes:
        said = (node.dir / "server-0.log").read_text().splitlines()
        assert "term" in said and "checkpoint" not in said, (node.index, said)
    assert job.leftovers() == []


def test_a_launcher_is_spared_the_checkpoint_signal_its_workers_get_it(
        make_job, tmp_path: Path) -> None:
    """A torchrun-role process (the elastic agent, here bash, whom SIGUSR1 would kill)
    gets SIGTERM only; the worker it started gets the checkpoint signal first."""
    from clusterkit.node import interruption
    from tests.fake_imds import fake_imds

    agent = f"bash -c {CHECKPOINTS!r} & trap 'echo agent-term; kill $!; exit 0' TERM; " \
        "while :; do sleep 0.05; done"
    with fake_imds() as (endpoint, served):
        job = make_job([[{"name": "torchrun", "role": "torchrun", "cmd": agent}]], grace=2,
                       extra=[{"checkpoint_grace": 1.0, "imds": endpoint}])
        job.start()
        wait_for(lambda: any(c == "GET" for c, _p, _s in served.log), "watching", 10)
        soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))
        served.documents[interruption.ACTION_PATH] = (
            f'{{"action": "terminate", "time": "{soon}"}}')
        [state] = job.wait_final(30)
    assert state["state"] == "interrupted"
    said = [line for line in (job.master.dir / "torchrun.log").read_text().splitlines()
            if line in ("checkpoint", "term", "agent-term")]
    assert said[0] == "checkpoint" and "agent-term" in said, said  # the agent lived on
    assert (job.master.dir / "torchrun.exit").read_text().strip() == "0"
    assert job.leftovers() == []


def test_each_node_samples_its_job_cpu_and_throughput_while_the_job_runs(
        make_job, tmp_path: Path) -> None:
    """With job.json's ``sampling``, every node's supervisor appends metric samples to
    the job's metrics.jsonl: node 0's worker burns one core and prints MXNet Speedometer
    lines, node 1's sleeps; the samples say so (job CPU from the job's cgroup, samples/s
    from the log). No GPU here: no ``gpus`` key, and no error."""
    from clusterkit.node.samples import read_samples

    go = tmp_path / "go"
    script = tmp_path / "burn.py"
    # a Speedometer line every 0.1 s of the clock (not every N iterations: how many
    # a loaded machine runs in a sample's time is not ours to know); spinning between
    script.write_text(f"""import os, time
end, next_line = time.time() + 30, 0.0
while time.time() < end and not os.path.exists({str(go)!r}):
    if time.time() >= next_line:
        print("Epoch[0] Batch [0-20]\\tSpeed: 512.50 samples/sec", flush=True)
        next_line = time.time() + 0.1
""")
    burn = f"python3 {script}"
    sampling = {"sampling": {"interval": 0.5, "throughput_pattern": None,
                             "dataset_mount": None}}
    job = make_job([ps_node(burn), ps_node(until_file(go))], extra=[sampling, sampling])
    job.start()

    def samples(node: int) -> list[dict]:
        return [s.to_json() for s in read_samples(str(job.nodes[node].dir)) if s.dt]

    wait_for(lambda: len(samples(0)) >= 4 and len(samples(1)) >= 4
             and any(s["samples_per_s"] for s in samples(0)[1:]),
             "4 samples each, node 0's with a rate", 30)
    busy, idle = samples(0)[1:], samples(1)[1:]  # (the first: the process starting)
    go.touch()
    job.wait_final()
    assert min(s["job_cpu"] for s in busy) > 0, busy  # about one core
    assert min(s["job_cpu"] for s in busy) >= 4 * max(s["job_cpu"] for s in idle), (busy, idle)
    assert {s["samples_per_s"] for s in busy if s["samples_per_s"]} == {512.5}
    assert all(s["samples_per_s"] is None for s in idle)
    assert all("gpus" not in s and s["node"] in (0, 1) for s in busy + idle)
    totals = [json.loads((n.dir / "summary.json").read_text()) for n in job.nodes]
    assert totals[0]["cpu_core_seconds"] > 0 and totals[0]["cpu_seconds"] > 0
    assert totals[0]["cpu_core_seconds"] >= 4 * totals[1]["cpu_core_seconds"]
    assert totals[0]["samples"] == pytest.approx(512.5 * sum(
        s["dt"] for s in samples(0) if s["samples_per_s"]), rel=1e-6)
    assert totals[1]["samples"] == 0 and totals[1]["gpus"] is None


def test_a_hung_job_gets_the_checkpoint_signal_and_with_stop_on_stall_is_stopped(
        make_job, tmp_path: Path) -> None:
    """No progress line and next to no CPU for stall_after: each node's supervisor
    gives its worker the checkpoint signal (MXNet's servers are spared), records the
    stall, and with stop_on_stall the job fails after checkpoint_grace naming it."""
    saved = tmp_path / "saved"
    # a loop: the signal may kill the sleep first, and a `wait` that returns then would
    # end a script of two waits with the trap's 138 (not the job's stall)
    worker = f"trap 'touch {saved}-$CK_TEST_NODE' USR1; while :; do sleep 300 & wait; done"
    # stall_after leaves bash time to set its trap on a loaded machine; the grace lets
    # every node see its own stall before the first one's stops the job (the nodes'
    # supervisors start up to seconds apart there)
    extra = {"sampling": {"interval": 0.3, "stall_after": 3, "stop_on_stall": True},
             "checkpoint_signal": "SIGUSR1", "checkpoint_grace": 5}
    job = make_job([ps_node(worker), ps_node(worker)], extra=[extra, extra])
    job.start()
    states = job.wait_final(timeout=60)
    assert [s["state"] for s in states] == ["failed", "failed"], states
    assert "stalled on node" in states[0]["reason"], states[0]["reason"]
    assert "train.stop_on_stall" in states[0]["reason"]
    assert all(s["stalled"] and "train.stall_after" in s["stalled"]["reason"] for s in states)
    assert (tmp_path / "saved-0").exists() and (tmp_path / "saved-1").exists()
    assert job.leftovers() == []


CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"


def fake_gpu_tools(where: Path, kernel_log: Path) -> Path:
    """A node's `nvidia-smi` (8 GPUs for the sampler's query; `-q`: nothing wrong) and
    `dmesg` (the real capture of a GPU fallen off the bus): no GPU here."""
    where.mkdir()
    rows = "".join(f"{i}, NVIDIA A100-SXM4-40GB, 97, 38917, 40960, 296.1, 62\\n"
                   for i in range(8))
    (where / "nvidia-smi").write_text(
        f"#!/bin/sh\ncase \"$1\" in --query-gpu=*) printf '{rows}' ;; *) echo ok ;; esac\n")
    (where / "dmesg").write_text(f"#!/bin/sh\ncat {kernel_log}\n")
    for tool in where.iterdir():
        tool.chmod(0o755)
    return where


def test_a_node_whose_gpu_fell_off_the_bus_interrupts_the_job_after_the_checkpoint(
        make_job, tmp_path: Path) -> None:
    """Node 1's supervisor reads its GPUs' health (health_every) and finds Xid 79 in its
    kernel log: the master interrupts the job naming node 1 and the Xid, every worker
    gets the checkpoint signal first, and the notice is in node 1's state (the client
    then replaces node 1 like a reclaimed one: tests/unit/test_plan_recovery.py)."""
    saved = tmp_path / "saved"
    worker = f"trap 'touch {saved}-$CK_TEST_NODE; exit 0' USR1; while :; do sleep 300 & wait; done"
    # the first read comes health_every after the start: bash has set its trap by then
    extra = {"sampling": {"interval": 0.3, "health_every": 2, "gpus": 8},
             "checkpoint_signal": "SIGUSR1", "checkpoint_grace": 5}
    job = make_job([ps_node(worker), ps_node(worker)], extra=[extra, extra])
    job.nodes[1].bin_dir = fake_gpu_tools(
        tmp_path / "bin1", CAPTURES / "gpu-fallen-off-bus.dmesg.driver-570.txt")
    job.start()
    states = job.wait_final(timeout=30)
    assert [s["state"] for s in states] == ["interrupted", "interrupted"], states
    reason = states[0]["reason"]
    assert reason.startswith("node 1: its GPUs are unfit: Xid 79 "), reason
    assert "GPU has fallen off the bus" in reason
    assert states[0]["interruption"]["kind"] == "unfit"
    assert states[0]["interruption"]["node"] == 1
    assert [n["kind"] for n in states[1]["notices"]] == ["unfit"]
    assert states[0]["notices"] == []  # node 0: no nvidia-smi, no Xid in its kernel log
    assert (tmp_path / "saved-0").exists() and (tmp_path / "saved-1").exists()
    assert job.leftovers() == []


def test_a_capacity_block_ending_checkpoints_every_process_before_aws_takes_the_nodes(
        make_job) -> None:
    """Node 1 runs in a Capacity Block (job.json's ``block_end``, as `train` writes it
    from the node's clusterkit:capacity-block-end tag) whose warning comes 2 s after the
    start (its end 40 min + 2 s ahead: AWS terminates a block's instances from 30 minutes
    before the end, and warns 10 minutes earlier, with nothing in the instance metadata,
    so no metadata service runs here). The supervisor treats the warning as an
    interruption: every worker gets the checkpoint signal, SIGTERM after the grace,
    and the job ends interrupted with the block's end as its reason."""
    from clusterkit.node import interruption

    procs = [{"name": "server-0", "role": "server", "cmd": CHECKPOINTS},
             {"name": "worker-0", "role": "worker", "cmd": CHECKPOINTS}]
    # AWS's warning comes 2 s after the start (bash has set its traps by then); the
    # grace is capped to end before the terminations, 10 minutes later
    block_end = time.time() + interruption.BLOCK_NOTICE_LEAD + 2
    job = make_job([procs, procs], grace=2, extra=[
        {"checkpoint_grace": 1.5}, {"checkpoint_grace": 1.5, "block_end": block_end}])
    job.start()
    states = job.wait_final(30)
    assert [s["state"] for s in states] == ["interrupted"] * 2
    assert all("node 1: its Capacity Block ends (AWS terminates its instances from"
               in s["reason"] for s in states), states
    assert [(n["kind"], n["action"]) for n in states[1]["notices"]] == [
        ("interruption", interruption.BLOCK_END_ACTION)]
    assert states[1]["notices"][0]["at"] == pytest.approx(
        block_end - interruption.BLOCK_TERMINATION_LEAD)
    for node in job.nodes:
        said = [line for line in (node.dir / "worker-0.log").read_text().splitlines()
                if line in ("checkpoint", "term")]
        assert said == ["checkpoint", "term"], (node.index, said)
    assert job.leftovers() == []


def test_the_budget_verb_checkpoints_every_worker_then_ends_the_job_as_budget(
        make_job) -> None:
    """The client's spending cap (``cluster/jobs/budget.py``) asks the master alone
    (``supervisor.py budget --reason … --checkpoint S``): the verb returns at once; every
    worker on every node gets the checkpoint signal (the servers do not), SIGTERM after
    the grace, and every node ends as ``budget`` with the client's reason."""
    procs = [{"name": "server-0", "role": "server", "cmd": CHECKPOINTS},
             {"name": "worker-0", "role": "worker", "cmd": CHECKPOINTS}]
    job = make_job([procs, procs], grace=2)
    job.start()
    job.wait_linked()
    reason = "spending cap: spent $0.8000 of the $1.00 cap (train.max_cost), $7.20/h"
    asked = job.master.cli("budget", "--reason", reason, "--checkpoint", "1.5")
    assert asked.returncode == 0, asked.stderr
    states = job.wait_final(30)
    assert [(s["state"], s["reason"]) for s in states] == [("budget", reason)] * 2
    for node in job.nodes:
        for name, want in (("server-0", ["term"]), ("worker-0", ["checkpoint", "term"])):
            said = [line for line in (node.dir / f"{name}.log").read_text().splitlines()
                    if line in ("checkpoint", "term")]
            assert said == want, (node.index, name, said)
    assert job.leftovers() == []
