"""examples/mxnet_dist_sync.py for real: a scheduler, a server and two workers of MXNet's
parameter server on 127.0.0.1 (no SSH, no clusterkit launcher: the DMLC_* environment
by hand, as clusterkit's topology gives it). The workers must end with the same
parameters, equal to init - lr * steps * (1 + 2), and each reads its shard of a RecordIO
file written by clusterkit's own RecordIO writer. The checkpoint contract (the directory
in CLUSTERKIT_CHECKPOINT_DIR, as clusterkit sets it): worker 0 saves every K steps and on
SIGUSR1, a job SIGKILLed after a checkpoint resumes and still ends at init - lr * steps *
(1 + 2), a torn or truncated checkpoint is skipped."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit.dataset.recordio import IndexedRecordWriter, pack_header
from clusterkit.node import sampler
from tests import support

pytestmark = pytest.mark.mxnet
EXAMPLE = Path(__file__).parents[2] / "examples" / "mxnet_dist_sync.py"
TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(role: str, argv: list[str], port: int, log: Path, **extra: str) -> subprocess.Popen:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(log.parent),
           "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DMLC_ROLE": role,
           "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port),
           "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "2", "DMLC_NODE_HOST": "127.0.0.1",
           "CLUSTERKIT_GPUS": "", **extra}
    with log.open("wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


class Job:
    """A scheduler, a server and two workers on a free port; logs and worker results
    under ``root``; ``env`` added to every process's environment."""

    def __init__(self, root: Path, *args: str, **env: str):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.out, port = root, root / "out", free_port()
        ps = [sys.executable, "-c", "import mxnet"]
        worker = [sys.executable, str(EXAMPLE), "--out", str(self.out), *args]
        self.procs = [start("scheduler", ps, port, root / "scheduler.log", **env),
                      start("server", ps, port, root / "server.log", **env)]
        self.workers = [start("worker", worker, port, root / f"worker{i}.log", **env)
                        for i in range(2)]
        self.procs += self.workers

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text()}" for f in sorted(self.root.glob("*.log")))

    def wait_for(self, pattern: str) -> re.Match:
        """The first match of ``pattern`` in the logs, once one is there (while every
        process lives)."""
        def found() -> re.Match | None:
            assert all(w.poll() is None for w in self.workers), self.logs()
            return re.search(pattern, self.logs(), re.M)

        return support.wait_for(found, f"{pattern!r} in the logs", TIMEOUT, interval=0.1)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def finish(self) -> tuple[list[int], list[dict], str]:
        """Exit codes of the two workers, their JSON results, and every log (for messages)."""
        try:
            codes = [w.wait(timeout=TIMEOUT) for w in self.workers]
            for p in self.procs[:2]:  # the scheduler and server end once the workers finalize
                p.wait(timeout=30)
        finally:
            self.kill()
        results = [json.loads(f.read_text()) for f in sorted(self.out.glob("worker-*.json"))]
        return codes, results, self.logs()


def run_job(tmp_path: Path, *args: str, **env: str) -> tuple[list[int], list[dict], str]:
    return Job(tmp_path, *args, **env).finish()


def write_rec(path: Path, count: int) -> None:
    """A .rec/.idx pair as `clusterkit pack` writes it (leaving the block commits it)."""
    with IndexedRecordWriter(str(path.with_suffix(".idx")), str(path)) as writer:
        for i in range(count):
            writer.write_idx(i, pack_header(float(i % 5), i) + bytes([i % 251]) * (100 + i))


def test_two_workers_aggregate_gradients_and_agree(tmp_path: Path):
    steps, lr = 7, 0.05
    codes, results, logs = run_job(tmp_path, "--steps", str(steps), "--lr", str(lr))
    assert codes == [0, 0], logs
    assert sorted(r["rank"] for r in results) == [0, 1], logs
    want = 1.0 - lr * steps * (1 + 2)  # each worker pushed rank + 1 every step
    for r in results:
        assert r["num_workers"] == 2 and r["ok"] is True
        assert r["params"] == pytest.approx([want] * 4, abs=1e-5)
    assert results[0]["params"] == results[1]["params"]
    assert logs.count("OK") == 2 and "MISMATCH" not in logs


def test_every_worker_prints_speedometer_lines_the_sampler_reads_as_a_rate(tmp_path: Path):
    """MXNet's Speedometer on every worker every --speed-every steps: `Epoch[0] Batch
    [5-10]\tSpeed: N samples/sec\tparam-error=0.000000`; the node sampler's parser
    (what `top`, the report and `scaling` read) gives a rate from each."""
    job = Job(tmp_path, "--steps", "12", "--speed-every", "4", "--batch-size", "64")
    codes, _, _ = job.finish()
    for worker in ("worker0.log", "worker1.log"):
        text = (tmp_path / worker).read_text()
        assert codes == [0, 0], text
        found = re.findall(r"^Epoch\[0\] Batch \[(\d+)-(\d+)\]\tSpeed: [\d.]+ samples/sec"
                           r"\tparam-error=([\d.e+-]+)$", text, re.M)
        assert [(a, b) for a, b, _ in found] == [("0", "4"), ("4", "8"), ("8", "12")], text
        assert all(float(error) < 1e-4 for _, _, error in found), text  # aggregated
        rates = [sampler.throughput(line) for line in text.splitlines() if "Speed:" in line]
        assert len(rates) == 3 and all(r is not None and r > 0 for r in rates), text


def test_workers_read_their_shards_of_a_recordio_file(tmp_path: Path):
    rec = tmp_path / "train.rec"
    write_rec(rec, 23)
    codes, results, logs = run_job(tmp_path, "--steps", "2", "--rec", str(rec))
    assert codes == [0, 0], logs
    shards = [r["dataset"] for r in results]
    assert sorted(s["records"] for s in shards) == [11, 12]  # i % 2 == rank
    assert all(s["total_records"] == 23 for s in shards)
    assert sum(s["bytes"] for s in shards) == sum(100 + i for i in range(23))
    assert sorted(set(shards[0]["labels"]) | set(shards[1]["labels"])) == [0, 1, 2, 3, 4]
    assert "read 1" in logs  # "read 11/12 record(s) of ..."


def param(steps: int, lr: float = 0.1) -> float:
    """The parameter after ``steps`` steps of two workers pushing 1 and 2 (init 1.0)."""
    return 1.0 - lr * steps * (1 + 2)


def saved(directory: Path) -> dict[str, dict]:
    return {f.name: json.loads(f.read_text()) for f in sorted(directory.iterdir())}


def test_a_checkpoint_every_k_steps_by_worker_0_the_newest_three_kept(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    codes, results, logs = run_job(tmp_path, "--steps", "9", "--checkpoint-every", "2",
                                   CLUSTERKIT_CHECKPOINT_DIR=str(ckpt))
    assert codes == [0, 0] and all(r["ok"] for r in results), logs
    for step in (2, 4, 6, 8):
        assert logs.count(f"checkpoint: saved step {step} to {ckpt}/ckpt-{step:08d}.json") == 1
    files = saved(ckpt)  # step 2's was deleted when step 8's was saved; no temp file left
    assert list(files) == ["ckpt-00000004.json", "ckpt-00000006.json", "ckpt-00000008.json"]
    for name, ckpt_ in files.items():
        step = int(name[5:13])
        assert ckpt_["step"] == step
        assert ckpt_["params"] == pytest.approx([param(step)] * 4, abs=1e-5)
    assert "resumed" not in logs


def test_the_checkpoint_signal_saves_at_the_next_step_and_the_job_goes_on(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    job = Job(tmp_path, "--steps", "20", "--checkpoint-every", "0", "--step-seconds", "0.2",
              CLUSTERKIT_CHECKPOINT_DIR=str(ckpt), CLUSTERKIT_CHECKPOINT_SIGNAL="SIGUSR1")
    try:
        job.wait_for(r"step 2/20$")
        for w in job.workers:
            os.kill(w.pid, signal.SIGUSR1)
        step = int(job.wait_for(r"checkpoint: saved step (\d+) to ").group(1))
    finally:
        codes, results, logs = job.finish()
    assert codes == [0, 0] and all(r["ok"] for r in results), logs
    assert 2 <= step < 20 and logs.count("checkpoint: saved") == 1, logs
    files = saved(ckpt)
    assert list(files) == [f"ckpt-{step:08d}.json"]
    assert files[f"ckpt-{step:08d}.json"]["params"] == pytest.approx([param(step)] * 4, abs=1e-5)


def test_a_job_killed_after_a_checkpoint_resumes_and_ends_where_an_uninterrupted_one_does(
        tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    first = Job(tmp_path / "first", "--steps", "15", "--checkpoint-every", "3",
                "--step-seconds", "0.2", CLUSTERKIT_CHECKPOINT_DIR=str(ckpt))
    try:
        first.wait_for(r"checkpoint: saved step 6 to ")
    finally:
        first.kill()  # SIGKILL: scheduler, server and workers, mid-run
    assert not list(first.out.glob("*.json")), first.logs()
    codes, results, logs = run_job(tmp_path / "second", "--steps", "15",
                                   "--checkpoint-every", "3",
                                   CLUSTERKIT_CHECKPOINT_DIR=str(ckpt),
                                   CLUSTERKIT_RESTART_COUNT="1")
    assert codes == [0, 0], logs
    resumed = {r["resumed_from"] for r in results}
    assert len(resumed) == 1 and (step := resumed.pop()) >= 6, logs
    assert logs.count(f"checkpoint: resumed from step {step} (restart 1)") == 2, logs
    assert logs.count("dist_sync rank 0: step ") == 15 - step, logs
    for r in results:
        assert r["ok"] is True and r["expected"] == [round(param(15), 6)] * 4
        assert r["params"] == pytest.approx([param(15)] * 4, abs=1e-5)


def test_a_torn_or_truncated_checkpoint_is_ignored(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "ckpt-00000004.json").write_text(json.dumps({"step": 4, "params": [param(4)] * 4}))
    (ckpt / "ckpt-00000008.json").write_text('{"step": 8, "params": [-1.4, -1.')  # truncated
    (ckpt / ".ckpt-00000009.json.tmp-123").write_text(  # a temp file, never renamed
        json.dumps({"step": 9, "params": [param(9)] * 4}))
    codes, results, logs = run_job(tmp_path, "--steps", "10", "--checkpoint-every", "0",
                                   CLUSTERKIT_CHECKPOINT_DIR=str(ckpt),
                                   CLUSTERKIT_RESTART_COUNT="2")
    assert codes == [0, 0], logs
    assert [r["resumed_from"] for r in results] == [4, 4], logs
    assert logs.count("checkpoint: resumed from step 4 (restart 2)") == 2, logs
    assert f"checkpoint: skipped incomplete {ckpt}/ckpt-00000008.json" in logs
    for r in results:
        assert r["ok"] is True
        assert r["params"] == pytest.approx([param(10)] * 4, abs=1e-5)
