"""examples/torchrun_ddp.py started exactly as clusterkit's topology says (two "nodes" on
127.0.0.1 and 127.0.0.2, two processes each, c10d rendezvous, gloo): every rank ends with
the same parameters; and clusterkit's checkpoint contract (CLUSTERKIT_CHECKPOINT_DIR as
clusterkit sets it): rank 0 saves every K steps and on SIGUSR1 to the workers, a job
killed after a checkpoint resumes and ends with an uninterrupted run's parameters, a torn
checkpoint is skipped. torch is not a clusterkit dependency (a CPU build is ~1 GB): the
interpreter is the one scripts/install.sh makes (the `torch` marker;
CLUSTERKIT_TORCH_PYTHON overrides it)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from clusterkit.spec import loads
from clusterkit.training import topology as topo
from tests import support

ROOT = Path(__file__).parents[2]
SCRIPT = "python3 examples/torchrun_ddp.py"
TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(out: Path, command: str, **env: str) -> tuple[topo.ProcessSpec, ...]:
    spec = loads(yaml.safe_dump({
        "name": "ddp", "region": "us-east-1",
        "nodes": {"count": 2, "instance_types": ["c5.large"]},
        "train": {"framework": "torchrun", "python": support.torch_python(), "command": command,
                  "workers_per_node": 2,
                  "env": {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                          "EXAMPLE_OUT_DIR": str(out)}}}))
    nodes = [topo.NodeSlot(0, "127.0.0.1", "deeplearning-master"),
             topo.NodeSlot(1, "127.0.0.2", "deeplearning-worker1")]
    procs = topo.job_processes(spec, nodes, job_id="j-20250101-120000-ab12", command=command,
                               port=9091, rdzv_port=free_port(), gpus_per_node=0,
                               workdir=str(ROOT))
    return tuple(replace(p, env={**p.env, **env}) for p in procs)  # as clusterkit sets them


class Run:
    """The two torchrun "nodes" of ``job`` started; their logs and results under ``root``."""

    def __init__(self, root: Path, command: str, **env: str):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.out = root, root / "out"
        self.procs = job(self.out, command, **env)
        self.started: list[subprocess.Popen] = []
        try:
            for i, p in enumerate(self.procs):
                with (root / f"node{i}.log").open("wb") as log:
                    self.started.append(subprocess.Popen(
                        p.argv, cwd=p.cwd, env={"PATH": "/usr/bin:/bin", **p.env}, stdout=log,
                        stderr=subprocess.STDOUT, start_new_session=True))
        except BaseException:
            self.kill()
            raise

    def logs(self) -> str:
        return "".join(f.read_text() for f in sorted(self.root.glob("node*.log")))

    def wait_for(self, pattern: str) -> re.Match:
        """The first match of ``pattern`` in the logs, once one is there (while every
        process lives)."""
        def found() -> re.Match | None:
            assert all(s.poll() is None for s in self.started), self.logs()
            return re.search(pattern, self.logs(), re.M)

        return support.wait_for(found, f"{pattern!r} in the logs", TIMEOUT, interval=0.1)

    def workers(self) -> list[int]:
        """The training processes: the torchrun agents' children (the agents are spared
        the checkpoint signal, as clusterkit's supervisor spares them)."""
        agents, found = {s.pid for s in self.started}, []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) in agents:  # ppid
                    found.append(int(stat.parent.name))
        return found

    def kill(self) -> None:
        for s in self.started:
            if s.poll() is None:
                os.killpg(s.pid, signal.SIGKILL)
                s.wait()

    def finish(self) -> tuple[list[int], list[dict], str]:
        """Exit codes of the two agents, every rank's JSON result (by rank), every log."""
        try:
            codes = [s.wait(timeout=TIMEOUT) for s in self.started]
        finally:
            self.kill()
        results = [json.loads(f.read_text()) for f in self.out.glob("rank-*.json")]
        return codes, sorted(results, key=lambda r: r["rank"]), self.logs()


def run(root: Path, command: str, **env: str) -> tuple[list[int], list[dict], str]:
    return Run(root, command, **env).finish()


RESULT = tuple[list[int], list[dict], str]  # the agents' exit codes, every rank's JSON, logs


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> RESULT:
    """12 steps without a checkpoint directory: the topology's run, and the parameters a
    resumed run must end with (one run serves both: each costs six torch imports)."""
    return run(tmp_path_factory.mktemp("uninterrupted"), f"{SCRIPT} --steps 12")


@pytest.fixture(scope="module")
def saved_every_2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RESULT]:
    """9 steps saving every 2: its checkpoint directory and its result."""
    root = tmp_path_factory.mktemp("saved")
    ckpt = root / "ckpt"
    return ckpt, run(root, f"{SCRIPT} --steps 9 --checkpoint-every 2",
                     CLUSTERKIT_CHECKPOINT_DIR=str(ckpt))


@pytest.mark.torch
def test_two_torchrun_nodes_train_one_model(tmp_path: Path, uninterrupted: RESULT):
    procs = job(tmp_path / "out", f"{SCRIPT} --steps 12")
    assert [p.argv[p.argv.index("--node-rank") + 1] for p in procs] == ["0", "1"]
    codes, results, logs = uninterrupted
    assert codes == [0, 0], logs
    assert [r["rank"] for r in results] == [0, 1, 2, 3], logs
    assert all(r["ok"] and r["world_size"] == 4 and r["backend"] == "gloo" for r in results)
    assert len({tuple(r["params"]) for r in results}) == 1
    assert {r["node_rank"] for r in results} == {"0", "1"}
    assert "checkpoint" not in logs


def ok_params(codes: list[int], results: list[dict], logs: str) -> list[float]:
    """The parameters every rank ended with, after checking the run succeeded."""
    assert codes == [0, 0], logs
    assert [r["rank"] for r in results] == [0, 1, 2, 3] and all(r["ok"] for r in results), logs
    return results[0]["params"]


@pytest.mark.torch
def test_rank_0_saves_every_k_steps_and_keeps_the_newest_three(
        saved_every_2: tuple[Path, RESULT]):
    ckpt, (codes, results, logs) = saved_every_2
    ok_params(codes, results, logs)
    for step in (2, 4, 6, 8):
        assert logs.count(f"checkpoint: saved step {step} to {ckpt}/ckpt-{step:08d}.pt") == 1
    assert sorted(f.name for f in ckpt.iterdir()) == [
        "ckpt-00000004.pt", "ckpt-00000006.pt", "ckpt-00000008.pt"]
    assert {r["resumed_from"] for r in results} == {0} and "resumed" not in logs


@pytest.mark.torch
def test_the_checkpoint_signal_saves_at_the_next_step_and_training_goes_on(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    job_ = Run(tmp_path, f"{SCRIPT} --steps 20 --checkpoint-every 0 --step-seconds 0.2",
               CLUSTERKIT_CHECKPOINT_DIR=str(ckpt), CLUSTERKIT_CHECKPOINT_SIGNAL="SIGUSR1")
    try:
        job_.wait_for(r"ddp rank 0: step 2/20 ")
        workers = job_.workers()
        assert len(workers) == 4, job_.logs()
        for pid in workers:
            os.kill(pid, signal.SIGUSR1)
        step = int(job_.wait_for(r"checkpoint: saved step (\d+) to ").group(1))
    finally:
        codes, results, logs = job_.finish()
    ok_params(codes, results, logs)
    assert 2 <= step < 20 and logs.count("checkpoint: saved") == 1, logs
    assert [f.name for f in ckpt.iterdir()] == [f"ckpt-{step:08d}.pt"]


@pytest.mark.torch
def test_a_killed_job_resumes_and_ends_with_an_uninterrupted_runs_parameters(
        tmp_path: Path, uninterrupted: RESULT):
    want = ok_params(*uninterrupted)
    ckpt = tmp_path / "ckpt"
    first = Run(tmp_path / "first", f"{SCRIPT} --steps 12 --checkpoint-every 3 "
                "--step-seconds 0.2", CLUSTERKIT_CHECKPOINT_DIR=str(ckpt))
    try:
        first.wait_for(r"checkpoint: saved step 3 to ")
    finally:
        first.kill()  # SIGKILL to both nodes' process groups: agents and workers, mid-run
    assert not first.out.exists(), first.logs()
    codes, results, logs = run(tmp_path / "second", f"{SCRIPT} --steps 12 --checkpoint-every 3",
                               CLUSTERKIT_CHECKPOINT_DIR=str(ckpt), CLUSTERKIT_RESTART_COUNT="1")
    assert ok_params(codes, results, logs) == want  # exactly
    step = results[0]["resumed_from"]
    assert step >= 3 and {r["resumed_from"] for r in results} == {step}, logs
    assert logs.count(f"checkpoint: resumed from step {step} (restart 1)") == 4, logs
    assert logs.count("ddp rank 0: step ") == 12 - step, logs


@pytest.mark.torch
def test_a_torn_or_truncated_checkpoint_is_ignored(tmp_path: Path,
                                                   saved_every_2: tuple[Path, RESULT]):
    saved, first = saved_every_2
    ok_params(*first)
    whole = (saved / "ckpt-00000008.pt").read_bytes()  # the newest whole checkpoint
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "ckpt-00000008.pt").write_bytes(whole)
    (ckpt / "ckpt-00000010.pt").write_bytes(whole[: len(whole) // 2])  # truncated
    (ckpt / ".ckpt-00000012.pt.tmp-123").write_bytes(whole)  # a temp file, never renamed
    codes, results, logs = run(tmp_path / "second", f"{SCRIPT} --steps 10 --checkpoint-every 0",
                               CLUSTERKIT_CHECKPOINT_DIR=str(ckpt), CLUSTERKIT_RESTART_COUNT="2")
    ok_params(codes, results, logs)
    assert [r["resumed_from"] for r in results] == [8, 8, 8, 8], logs
