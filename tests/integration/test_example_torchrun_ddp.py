"""examples/torchrun_ddp.py started exactly as clusterkit's topology says (two "nodes" on
127.0.0.1 and 127.0.0.2, two processes each, c10d rendezvous, gloo): every rank ends with
the same parameters. torch is not a clusterkit dependency (a CPU build is ~1 GB), so this
runs only when CLUSTERKIT_TORCH_PYTHON names an interpreter that imports torch, e.g.
    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch numpy
    CLUSTERKIT_TORCH_PYTHON=/tmp/torch/bin/python pytest -m torch tests/integration/test_example_torchrun_ddp.py
(ran here with torch 2.13.0+cpu: 4 ranks OK in ~18 s on 2 cores)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterkit.spec import loads
from clusterkit.training import topology as topo

ROOT = Path(__file__).parents[2]
TORCH_PYTHON = os.environ.get("CLUSTERKIT_TORCH_PYTHON", "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(out: Path, command: str) -> tuple[topo.ProcessSpec, ...]:
    spec = loads(yaml.safe_dump({
        "name": "ddp", "region": "us-east-1",
        "nodes": {"count": 2, "instance_types": ["c5.large"]},
        "train": {"framework": "torchrun", "python": TORCH_PYTHON, "command": command,
                  "workers_per_node": 2,
                  "env": {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                          "EXAMPLE_OUT_DIR": str(out)}}}))
    nodes = [topo.NodeSlot(0, "127.0.0.1", "deeplearning-master"),
             topo.NodeSlot(1, "127.0.0.2", "deeplearning-worker1")]
    return topo.job_processes(spec, nodes, job_id="j-20250101-120000-ab12", command=command,
                              port=9091, rdzv_port=free_port(), gpus_per_node=0,
                              workdir=str(ROOT))


@pytest.mark.torch  # scripts/test.sh deselects it: torch is not installed for CI
def test_two_torchrun_nodes_train_one_model(tmp_path: Path):
    assert TORCH_PYTHON, "set CLUSTERKIT_TORCH_PYTHON to an interpreter that imports torch"
    procs = job(tmp_path / "out", "python3 examples/torchrun_ddp.py --steps 5")
    assert [p.argv[p.argv.index("--node-rank") + 1] for p in procs] == ["0", "1"]
    started = []
    try:
        for i, p in enumerate(procs):
            with (tmp_path / f"node{i}.log").open("wb") as log:
                started.append(subprocess.Popen(
                    p.argv, cwd=p.cwd, env={"PATH": "/usr/bin:/bin", **p.env}, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True))
        codes = [s.wait(timeout=120) for s in started]
    finally:
        for s in started:
            if s.poll() is None:
                os.killpg(s.pid, signal.SIGKILL)
                s.wait()
    logs = "".join(f.read_text() for f in sorted(tmp_path.glob("node*.log")))
    assert codes == [0, 0], logs
    results = [json.loads(f.read_text()) for f in sorted((tmp_path / "out").glob("*.json"))]
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3], logs
    assert all(r["ok"] and r["world_size"] == 4 and r["backend"] == "gloo" for r in results)
    assert len({tuple(r["params"]) for r in results}) == 1
    assert {r["node_rank"] for r in results} == {"0", "1"}
