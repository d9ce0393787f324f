"""`clusterkit up` at scale: wall time of the first `up` for 1, 16 and 64 nodes as a
ratio to one node (goal: 64 nodes at most 3x one), its mutating AWS calls (goal: the
same count at every size), and where the time goes.

    .venv/bin/python bench/bench_up.py                 # sandbox (root: real sshd per node)
    .venv/bin/python bench/bench_up.py --moto          # plain moto server, no SSH wait
    .venv/bin/python bench/bench_up.py --sizes 1,4,16

Each size: `up` (counted and timed by phase), a second `up` (must make no mutating
call), `down`. The first `up` is what `clusterkit up` does: launch, SSH wait, and the
node bootstrap when `up` runs one. A 1-node `up` and `down` first, not timed: the
sandbox's AWS endpoint builds each service's state on its first call (about 0.7 s), a
cost no size should carry.

CPU: the seconds the emulated nodes (their sshd, handshakes, facts, bootstrap scripts),
the sandbox (moto, booting nodes) and the client spent during the first `up`, and the
floor that emulation puts under the wall time on this machine's cores
(bench/nodecpu.py): on AWS each node brings its own CPU.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import nodecpu  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.events import Event, Kind, Stage  # noqa: E402

READ = ("Describe", "List", "Get", "Head")
GOAL_RATIO = 3.0


@dataclass
class Phases:
    """A reporter that keeps when each stage first started (seconds since ``t0``)."""

    t0: float = field(default_factory=time.perf_counter)
    started: dict[str, float] = field(default_factory=dict)

    def __call__(self, event: Event) -> None:
        if event.kind == Kind.STAGE_STARTED and event.stage is not None:
            self.started.setdefault(event.stage.value, time.perf_counter() - self.t0)


def _start(use_moto: bool, tmp: Path) -> tuple[object, bool]:
    """Start the sandbox (or a moto server); returns (stopper, ssh available)."""
    os.environ.update({"HOME": str(tmp), "CLUSTERKIT_SANDBOX": "1",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("SSH_AUTH_SOCK", None)
    (tmp / ".ssh").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp / ".ssh" / "id_ed25519")], check=True)
    if not use_moto and os.geteuid() == 0:
        from clusterkit import sandboxmode
        from clusterkit_sandbox.control import do_start, do_stop

        do_start(tmp / "sandbox")
        sandboxmode.apply(os.environ, str(tmp / "sandbox"))
        return (lambda: do_stop(tmp / "sandbox")), True
    from moto.server import ThreadedMotoServer

    from clusterkit_sandbox import ec2_gaps

    ec2_gaps.install()  # the emulator gap-fills the sandbox and the tests make
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({"AWS_ENDPOINT_URL": f"http://{host}:{port}",
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "CLUSTERKIT_CALLER_CIDR": "127.0.0.1/32"})
    return server.stop, False


def _runtime(counter: Counter[str], phases: Phases | None = None) -> Runtime:
    session = boto3.Session(region_name="us-east-1")
    session.events.register("before-call", lambda model, **_: counter.update([model.name]))
    return Runtime(session=session, poll=0.2, report=phases or (lambda _: None))


def _mutating(counter: Counter[str]) -> dict[str, int]:
    return {k: v for k, v in counter.items() if not k.startswith(READ)}


def bench(count: int, tmp: Path, ssh: bool) -> dict[str, object]:
    spec = tmp / f"bench-{count}.yaml"
    spec.write_text(spec_text("bench", count, placement_group=True))
    first: Counter[str] = Counter()
    before = nodecpu.sample(settle=1.0)
    phases = Phases()
    do_up(str(spec), yes=True, rt=_runtime(first, phases), wait_ssh=ssh, timeout=600)
    wall = time.perf_counter() - phases.t0
    time.sleep(0.3)  # the nodes' sessions end and are reaped
    cpu = nodecpu.split(before, nodecpu.sample())
    second: Counter[str] = Counter()
    start = time.perf_counter()
    do_up(str(spec), yes=True, rt=_runtime(second), wait_ssh=ssh, timeout=600)
    wall2 = time.perf_counter() - start
    do_down(str(spec), yes=True, rt=_runtime(Counter()))
    return {"nodes": count, "wall": wall, "calls": sum(first.values()), "by_op": first,
            "mutating": _mutating(first), "wall2": wall2, "phases": phases.started,
            "mutating2": sum(_mutating(second).values()), "cpu": cpu}


def warm_up(tmp: Path, ssh: bool) -> None:
    """One `up` and `down` of 1 node, not timed (the endpoint's first calls)."""
    spec = tmp / "warm-up.yaml"
    spec.write_text(spec_text("warm", 1, placement_group=True))
    do_up(str(spec), yes=True, rt=_runtime(Counter()), wait_ssh=ssh, timeout=600)
    do_down(str(spec), yes=True, rt=_runtime(Counter()))


def _by_operation(rows: list[dict]) -> None:
    """Every AWS call of the first `up`, by operation, one column per size."""
    ops = sorted({op for r in rows for op in r["by_op"]})
    width = max(len(op) for op in ops) if ops else 10
    print(f"\nAWS calls of the first up by operation\n{'operation':<{width}} "
          + " ".join(f"{str(r['nodes']) + ' node(s)':>11}" for r in rows))
    for op in ops:
        print(f"{op:<{width}} " + " ".join(f"{r['by_op'][op]:>11}" for r in rows))


def _timeline(rows: list[dict]) -> None:
    """Seconds from the start of the first `up` to each stage, and to the end."""
    stages = [s.value for s in Stage if any(s.value in r["phases"] for r in rows)]
    print("\nfirst up: seconds from its start to each stage starting\n"
          f"{'nodes':>5} " + " ".join(f"{s:>10}" for s in stages) + f" {'end':>7}")
    for r in rows:
        cells = [f"{r['phases'][s]:>10.2f}" if s in r["phases"] else f"{'-':>10}"
                 for s in stages]
        print(f"{r['nodes']:>5} " + " ".join(cells) + f" {r['wall']:>7.2f}")


def report(rows: list[dict], ssh: bool) -> None:
    where = "sandbox (moto + sshd per node), SSH wait on" if ssh else "moto server, no SSH"
    print(f"clusterkit up: {where}")
    base = rows[0]["wall"]
    print(f"{'nodes':>5} {'wall s':>7} {'ratio':>6} {'calls':>6} {'mutating':>8} "
          f"{'2nd up s':>8} {'2nd up mutating':>15}  mutating calls of the first up")
    for r in rows:
        muts = ", ".join(f"{k} {v}" for k, v in sorted(r["mutating"].items()))
        print(f"{r['nodes']:>5} {r['wall']:>7.2f} {r['wall'] / base:>6.2f} {r['calls']:>6} "
              f"{sum(r['mutating'].values()):>8} {r['wall2']:>8.2f} {r['mutating2']:>15}  "
              f"{muts}")
    _timeline(rows)
    print("\n" + "\n".join(nodecpu.table([(r["nodes"], r["cpu"], r["wall"]) for r in rows],
                                         "first up")))
    _by_operation(rows)
    # A 1-node launch carries its whole identity at creation; any larger one needs one
    # CreateTags per distinct tag set (master, workers): a constant, not one per node.
    multi = {sum(r["mutating"].values()) for r in rows if r["nodes"] > 1}
    counts = [sum(r["mutating"].values()) for r in rows]
    sizes = ", ".join(f"{r['nodes']}: {c}" for r, c in zip(rows, counts, strict=True))
    print(f"\nmutating calls independent of N (every size > 1 node the same, 1 node no "
          f"more): {'yes' if len(multi) <= 1 and counts[0] <= max(counts) else 'NO'} "
          f"({sizes})")
    big = rows[-1]
    ratio = big["wall"] / base
    print(f"{big['nodes']} nodes / {rows[0]['nodes']} node(s): {ratio:.2f}x "
          f"(goal at most {GOAL_RATIO:g}x: {'met' if ratio <= GOAL_RATIO else 'NOT met'})")
    for line in nodecpu.out_of_reach(big["nodes"], big["cpu"], base, GOAL_RATIO, "`up`"):
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moto", action="store_true", help="plain moto server, no SSH")
    parser.add_argument("--sizes", default="1,16,64")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        stop, ssh = _start(args.moto, Path(tmpdir))
        try:
            warm_up(Path(tmpdir), ssh)
            rows = [bench(int(n), Path(tmpdir), ssh) for n in args.sizes.split(",")]
        finally:
            stop()
    report(rows, ssh)


if __name__ == "__main__":
    main()
