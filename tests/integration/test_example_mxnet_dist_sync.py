"""examples/mxnet_dist_sync.py for real: a scheduler, a server and two workers of MXNet's
parameter server on 127.0.0.1 (no SSH, no clusterkit launcher: the DMLC_* environment
by hand, as clusterkit's topology gives it). The workers must end with the same
parameters, equal to init - lr * steps * (1 + 2), and each reads its shard of a RecordIO
file written by clusterkit's own RecordIO writer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit.dataset.recordio import IndexedRecordWriter, pack_header

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


def run_job(tmp_path: Path, *args: str) -> tuple[list[int], list[dict], str]:
    """Exit codes of the two workers, their JSON results, and every log (for messages)."""
    port, out = free_port(), tmp_path / "out"
    ps = [sys.executable, "-c", "import mxnet"]
    worker = [sys.executable, str(EXAMPLE), "--out", str(out), *args]
    procs = [start("scheduler", ps, port, tmp_path / "scheduler.log"),
             start("server", ps, port, tmp_path / "server.log")]
    workers = [start("worker", worker, port, tmp_path / f"worker{i}.log") for i in range(2)]
    procs += workers
    try:
        codes = [w.wait(timeout=TIMEOUT) for w in workers]
        for p in procs[:2]:  # the scheduler and server end once the workers finalize
            p.wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    logs = "\n".join(f"--- {f.name}\n{f.read_text()}" for f in sorted(tmp_path.glob("*.log")))
    results = [json.loads(f.read_text()) for f in sorted(out.glob("worker-*.json"))]
    return codes, results, logs


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
