"""AWS API calls by operation and wall time of `clusterkit up` for 1, 4 and 16 nodes.

    .venv/bin/python bench/bench_up.py            # sandbox (root: real sshd per node)
    .venv/bin/python bench/bench_up.py --moto     # plain moto server, no SSH wait

Each size: `up` (counted), a second `up` (must make no mutating call), `down`. The
number of launch calls (RunInstances) must not grow with the node count.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterkit.cluster.down import do_down  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.cluster.up import do_up  # noqa: E402

SPEC = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [c5.large]
  market: on-demand
  image: {{id: ami-1e749f67}}
  placement_group: true
  root_volume: {{size_gb: 8, type: gp3}}
ssh: {{user: ubuntu}}
"""
READ = ("Describe", "List", "Get", "Head")


def _start(use_moto: bool, tmp: Path) -> tuple[object, bool]:
    """Start the sandbox (or a moto server); returns (stopper, ssh available)."""
    os.environ.update({"HOME": str(tmp), "CLUSTERKIT_SANDBOX": "1",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("SSH_AUTH_SOCK", None)
    (tmp / ".ssh").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp / ".ssh" / "id_ed25519")], check=True)
    if not use_moto and os.geteuid() == 0:
        from clusterkit.sandbox import client
        from clusterkit.sandbox.control import do_start, do_stop

        do_start(tmp / "sandbox")
        client.apply(os.environ, str(tmp / "sandbox"))
        return (lambda: do_stop(tmp / "sandbox")), True
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({"AWS_ENDPOINT_URL": f"http://{host}:{port}",
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    return server.stop, False


def _runtime(counter: Counter[str]) -> Runtime:
    session = boto3.Session(region_name="us-east-1")
    session.events.register("before-call", lambda model, **_: counter.update([model.name]))
    return Runtime(session=session, poll=0.2)  # progress events are dropped


def bench(count: int, tmp: Path, ssh: bool) -> dict[str, object]:
    spec = tmp / f"bench-{count}.yaml"
    spec.write_text(SPEC.format(name=f"bench{count}-{uuid.uuid4().hex[:4]}", count=count))
    first: Counter[str] = Counter()
    start = time.perf_counter()
    do_up(str(spec), yes=True, rt=_runtime(first), wait_ssh=ssh, timeout=600)
    wall = time.perf_counter() - start
    second: Counter[str] = Counter()
    start = time.perf_counter()
    do_up(str(spec), yes=True, rt=_runtime(second), wait_ssh=ssh, timeout=600)
    wall2 = time.perf_counter() - start
    do_down(str(spec), yes=True, rt=_runtime(Counter()))
    mutating = {k: v for k, v in first.items() if not k.startswith(READ)}
    return {"nodes": count, "wall": wall, "calls": sum(first.values()), "by_op": first,
            "mutating": mutating, "run": first["RunInstances"], "wall2": wall2,
            "mutating2": sum(v for k, v in second.items() if not k.startswith(READ))}


def _by_operation(rows: list[dict[str, object]]) -> None:
    """Every AWS call of the first `up`, by operation, one column per size."""
    ops = sorted({op for r in rows for op in r["by_op"]})  # type: ignore[attr-defined]
    width = max(len(op) for op in ops) if ops else 10
    print(f"\nAWS calls of the first up by operation\n{'operation':<{width}} "
          + " ".join(f"{str(r['nodes']) + ' node(s)':>11}" for r in rows))
    for op in ops:
        print(f"{op:<{width}} " + " ".join(f"{r['by_op'][op]:>11}" for r in rows))  # type: ignore[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moto", action="store_true", help="plain moto server, no SSH")
    parser.add_argument("--sizes", default="1,4,16")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        stop, ssh = _start(args.moto, Path(tmpdir))
        try:
            rows = [bench(int(n), Path(tmpdir), ssh) for n in args.sizes.split(",")]
        finally:
            stop()
    where = "sandbox (moto + sshd per node), SSH wait on" if ssh else "moto server, no SSH"
    print(f"clusterkit up: {where}")
    print(f"{'nodes':>5} {'wall s':>7} {'calls':>6} {'RunInstances':>12} {'2nd up s':>8} "
          f"{'2nd up mutating':>15}  mutating calls of the first up")
    for r in rows:
        muts = ", ".join(f"{k} {v}" for k, v in sorted(r["mutating"].items()))
        print(f"{r['nodes']:>5} {r['wall']:>7.2f} {r['calls']:>6} {r['run']:>12} "
              f"{r['wall2']:>8.2f} {r['mutating2']:>15}  {muts}")
    _by_operation(rows)
    runs = {r["run"] for r in rows}
    print(f"launch calls constant across sizes: {'yes' if len(runs) == 1 else 'NO'} ({runs})")


if __name__ == "__main__":
    main()
