"""Training jobs of several "nodes" on this machine, for the supervisor's tests and its
bench: each node a job dir of its own under its own CLUSTERKIT_ROOT, its supervisor a
real daemon (``python3 <job dir>/supervisor.py start``), the coordinator on 127.0.0.1."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from clusterkit.node import bundle, jobstate
from clusterkit.training import jobfiles
from tests.support import wait_for

SLEEP = "exec sleep 1000"
MARKER = "s3cr3t-marker-9f2c1e"  # an env value that must show on no command line
# The nodes' python3 (Ubuntu 20.04 has 3.8): CLUSTERKIT_TEST_NODE_PYTHON=python3.8 checks it.
NODE_PYTHON = os.environ.get("CLUSTERKIT_TEST_NODE_PYTHON") or sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_job_id() -> str:
    return time.strftime("j-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


@dataclass
class Node:
    index: int
    dir: Path
    bin_dir: Path | None = None  # put first on its supervisor's PATH (fake node tools)

    def cli(self, verb: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERKIT_JOB")}
        if self.bin_dir is not None:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        return subprocess.run([NODE_PYTHON, str(self.dir / "supervisor.py"), verb,
                               str(self.dir), *args], capture_output=True, text=True,
                              env=env, timeout=timeout)

    def log(self) -> str:
        try:
            return (self.dir / "supervisor.log").read_text()
        except OSError:
            return ""

    def state(self) -> dict:
        try:
            return json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            return {}


@dataclass
class Job:
    id: str
    nodes: list[Node]

    @property
    def master(self) -> Node:
        return self.nodes[0]

    def start(self) -> None:
        """Every node's supervisor started; ``start`` returns once it has daemonized
        (bench/bench_supervisor.py measures how soon)."""
        for node in self.nodes:
            out = node.cli("start")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("started ") and out.stdout.split()[1].isdigit()

    def wait_final(self, timeout: float = 30, count: int | None = None) -> list[dict]:
        """The state of the first ``count`` nodes (all), once final and their supervisor
        has exited."""
        nodes = self.nodes[:count]
        wait_for(lambda: all(n.state().get("state") in jobstate.FINAL
                             and n.cli("status").stdout.find('"supervisor": "gone"') > 0
                             for n in nodes), f"job {self.id} final", timeout)
        return [n.state() for n in nodes]

    def wait_linked(self, timeout: float = 10) -> None:
        """Every node linked to the master, as both ends' supervisor.log say (the master
        has taken each one's hello; heartbeats flow from here on)."""
        def linked() -> bool:
            master = self.master.log()
            return all(f"linked to node {n.index}\n" in master
                       and "linked to node 0\n" in n.log() for n in self.nodes[1:])

        wait_for(linked, f"job {self.id}: every node linked to the master", timeout)

    def leftovers(self) -> list[int]:
        return pids_with_env(f"CLUSTERKIT_JOB_ID={self.id}")

    def stop_all(self) -> None:
        for node in self.nodes:
            node.cli("stop", "--grace", "1")


def pids_with_env(entry: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat[0] != b"Z" and entry.encode() in env:
            found.append(int(pid))
    return found


def until_file(path: Path) -> str:
    """A shell command that ends once ``path`` exists: a process the test lets go."""
    return f"until [ -e {path} ]; do sleep 0.05; done"


def ps_node(worker_cmd: str, extra: list[dict] | None = None) -> list[dict]:
    """One node of a parameter-server job: a server that never exits and a worker."""
    return [{"name": "server-0", "role": "server", "cmd": SLEEP},
            {"name": "worker-0", "role": "worker", "cmd": worker_cmd}, *(extra or [])]


def cgroup_dirs(job: Job) -> list[Path]:
    base = Path("/sys/fs/cgroup/unified/clusterkit")
    return [p for p in base.glob(f"*{job.id}")] if base.exists() else []


def efa_profile(root: Path, index: int) -> Path:
    """Where node ``index`` of a job under ``root`` keeps its EFA profile (the efa
    bootstrap step's file, efa.PROFILE_PATH on a real node); absent unless a test
    writes it."""
    return root / f"node{index}" / "etc" / "profile.d" / "clusterkit-efa.sh"


def build_job(root: Path, node_procs: list[list[dict]], grace: float = 1, hb: float = 10,
              port: int | None = None, extra: list[dict] | None = None) -> Job:
    """A job of ``len(node_procs)`` nodes under ``root``/nodeI, written, not started;
    ``extra``: more job.json keys, per node."""
    job_id, port, token = new_job_id(), port or free_port(), secrets.token_hex(16)
    nodes = []
    for i, procs in enumerate(node_procs):
        d = Path(jobfiles.job_dir(job_id, root=str(root / f"node{i}")))
        d.mkdir(parents=True, mode=0o700)
        for name, text in bundle.files().items():
            (d / name).write_text(text)
        spec = {"version": 1, "job_id": job_id, "node_index": i, "node_name": f"n{i}",
                "cgroup_name": f"cktest-{i}-{job_id}", "is_master": i == 0,
                "num_nodes": len(node_procs), "grace_seconds": grace,
                "heartbeat_timeout": hb,
                "coordinator": {"host": "127.0.0.1", "port": port, "token": token},
                # the node's EFA profile under its own root, never this machine's
                "efa_profile": str(efa_profile(root, i)),
                "processes": [{"name": p["name"], "role": p["role"],
                               "argv": ["bash", "-c", p["cmd"]], "cwd": str(root),
                               "env": {"SECRET_THING": MARKER, "CK_TEST_NODE": str(i)}}
                              for p in procs]}
        spec.update((extra or [{}] * len(node_procs))[i])
        (d / "job.json").write_text(json.dumps(spec))
        (d / "job.json").chmod(0o600)
        nodes.append(Node(i, d))
    return Job(job_id, nodes)


def kill_supervisor(node: Node) -> None:
    """SIGKILL the node's supervisor daemon alone (its processes live on)."""
    os.kill(int((node.dir / "supervisor.pid").read_text()), signal.SIGKILL)
