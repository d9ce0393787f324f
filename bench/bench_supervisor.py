"""How soon the node supervisor acts: the numbers tests/integration/test_node_supervisor.py
asserts no threshold on (it checks order and outcome), measured here on real daemons,
processes and sockets on this machine (each "node" a job dir of its own, as in that test).

    sudo .venv/bin/python -m bench.bench_supervisor [--nodes 3] [--repeat 5]

For each of ``--repeat`` runs (the median is printed, with the design bound beside it):
  start        ``supervisor.py start`` until it returns, daemonized (per node)
  fail-fast    a worker's exit (its .exit file) until every node's state is final
  stop         ``stop --grace 1`` on one node until every node's state is final
  lost-master  the master's supervisor SIGKILLed until a node calls the job failed
               (heartbeat timeout 2 s)
Needs root (cgroup v2 directories), like the test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.supervisor_jobs import SLEEP, Job, build_job, kill_supervisor, ps_node

FINAL = ("succeeded", "failed", "stopped")
HEARTBEAT_TIMEOUT = 2.0


def _until(check: Callable[[], bool], limit: float = 60.0) -> float:
    """Seconds until ``check`` holds (polled every 10 ms); fails past ``limit``."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > limit:
            raise SystemExit("bench_supervisor: the job did not get there in time")
        time.sleep(0.01)
    return time.monotonic() - t0


def _final(job: Job) -> bool:
    return all(n.state().get("state") in FINAL for n in job.nodes)


def _clean(job: Job) -> None:
    job.stop_all()


def start_and_fail_fast(root: Path, nodes: int) -> tuple[float, float]:
    """(median start per node, failure -> every node final)."""
    procs = [ps_node(SLEEP) for _ in range(nodes)]
    procs[-1] = ps_node("sleep 1; exit 3")
    job = build_job(root, procs, grace=2)
    starts = []
    for node in job.nodes:
        t0 = time.monotonic()
        node.cli("start")
        starts.append(time.monotonic() - t0)
    exit_file = job.nodes[-1].dir / "worker-0.exit"
    _until(exit_file.exists)
    failed_at = exit_file.stat().st_mtime
    _until(lambda: _final(job))
    took = time.time() - failed_at
    _clean(job)
    return statistics.median(starts), took


def stop_latency(root: Path, nodes: int) -> float:
    job = build_job(root, [ps_node(SLEEP) for _ in range(nodes)], grace=1)
    job.start()
    _until(lambda: all(n.state().get("state") == "running" for n in job.nodes))
    t0 = time.monotonic()
    job.nodes[-1].cli("stop", "--grace", "1")
    _until(lambda: _final(job))
    took = time.monotonic() - t0
    _clean(job)
    return took


def lost_master(root: Path) -> float:
    job = build_job(root, [ps_node(SLEEP), ps_node(SLEEP)], grace=1, hb=HEARTBEAT_TIMEOUT)
    job.start()
    job.wait_linked()  # both supervisor.logs say so: heartbeats flow from here on
    kill_supervisor(job.master)
    took = _until(lambda: job.nodes[1].state().get("state") == "failed")
    job.master.cli("stop", "--grace", "0")
    _clean(job)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows: dict[str, list[float]] = {"start": [], "fail-fast": [], "stop": [],
                                    "lost-master": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            start, fail = start_and_fail_fast(Path(tmp) / "a", args.nodes)
            rows["start"].append(start)
            rows["fail-fast"].append(fail)
            rows["stop"].append(stop_latency(Path(tmp) / "b", args.nodes))
            rows["lost-master"].append(lost_master(Path(tmp) / "c"))
    bounds = {"start": "returns once daemonized", "fail-fast": "grace 2 s + a tick",
              "stop": "grace 1 s + a tick",
              "lost-master": f"heartbeat timeout {HEARTBEAT_TIMEOUT:g} s + a tick"}
    print(f"{'what':<12} {'median s':>9} {'max s':>7}  bound ({args.nodes} nodes, "
          f"{args.repeat} runs)")
    for name, times in rows.items():
        print(f"{name:<12} {statistics.median(times):>9.3f} {max(times):>7.3f}  {bounds[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
