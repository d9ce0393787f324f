"""Sandbox speed: `start` wall time, seconds from RunInstances to sshd answering
on every node, and `stop` wall time (goals: start < 3 s, node < 2 s). Root only.

    .venv/bin/python bench/bench_sandbox.py [--nodes 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
from pathlib import Path

from clusterkit_sandbox import credentials
from clusterkit_sandbox.control import do_start, do_stop
from clusterkit_sandbox.state import NODES_FILE, read_json

GIVE_UP = 30.0  # seconds; a node that never answers ends the bench instead of hanging it


def _listening(address: str) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((address, 22)) == 0


def one_round(nodes: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        t0 = time.monotonic()
        status = do_start(where)
        started = time.monotonic() - t0
        try:
            ec2 = credentials.client(where, "ec2", status["endpoint"])
            ec2.create_key_pair(KeyName="bench")
            t1 = time.monotonic()
            resp = ec2.run_instances(
                ImageId="ami-12c6146b", MinCount=nodes, MaxCount=nodes, KeyName="bench",
                InstanceType="t3.micro", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                    {"Key": "clusterkit:cluster", "Value": "bench"}]}])
            ids = [i["InstanceId"] for i in resp["Instances"]]
            while True:
                recs = read_json(where / NODES_FILE, {}) or {}
                if all(i in recs and _listening(recs[i]["address"]) for i in ids):
                    break
                if time.monotonic() - t1 > GIVE_UP:
                    raise SystemExit(f"nodes not reachable after {GIVE_UP} s: {recs}")
                time.sleep(0.01)
            ready = time.monotonic() - t1
        finally:
            t2 = time.monotonic()
            do_stop(where)
            stopped = time.monotonic() - t2
    return started, ready, stopped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = [one_round(args.nodes) for _ in range(args.repeat)]
    for label, idx in (("start", 0), (f"{args.nodes} nodes ssh-ready", 1), ("stop", 2)):
        values = [r[idx] for r in rounds]
        print(f"{label:>22}: median {statistics.median(values):.2f} s  max {max(values):.2f} s")


if __name__ == "__main__":
    main()
