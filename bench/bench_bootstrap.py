"""The node bootstrap at scale: wall time of a no-op `up` (every node already bootstrapped,
all receipts present) on 1, 4 and 16 sandbox nodes, as a ratio to one node (goal: 16
nodes at most 1.5x one), and the part of it the bootstrap stage takes.

    sudo .venv/bin/python bench/bench_bootstrap.py              # needs root: sshd per node
    sudo .venv/bin/python bench/bench_bootstrap.py --sizes 1,4,16 --repeat 5

Each size: one `up` that bootstraps the nodes (not timed), then ``--repeat`` no-op `up`
runs, each checked to run no step body; the median is reported. Then `down`. CPU per
run: what the emulated nodes, the sandbox and the client spent, and the floor that
emulation puts under the wall on this machine (bench/nodecpu.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import nodecpu  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.events import Event, Kind, Stage  # noqa: E402

GOAL_RATIO = 1.5


@dataclass
class Clock:
    """A reporter that keeps when the bootstrap stage started and ended."""

    marks: dict[Kind, float] = field(default_factory=dict)

    def __call__(self, event: Event) -> None:
        if event.stage is Stage.BOOTSTRAP and event.kind in (Kind.STAGE_STARTED,
                                                              Kind.STAGE_DONE):
            self.marks[event.kind] = time.perf_counter()

    @property
    def bootstrap(self) -> float:
        return self.marks[Kind.STAGE_DONE] - self.marks[Kind.STAGE_STARTED]


def _start(tmp: Path) -> object:
    """The sandbox in ``tmp``, this process pointed at it; returns its stopper."""
    from clusterkit import sandboxmode
    from clusterkit_sandbox.control import do_start, do_stop

    os.environ.update({"HOME": str(tmp), "CLUSTERKIT_SANDBOX": "1",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("SSH_AUTH_SOCK", None)  # the key in ~/.ssh logs in
    (tmp / ".ssh").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp / ".ssh" / "id_ed25519")], check=True)
    do_start(tmp / "sandbox")
    sandboxmode.apply(os.environ, str(tmp / "sandbox"))
    return lambda: do_stop(tmp / "sandbox")


def _runtime(report: Clock | None = None) -> Runtime:
    import boto3

    return Runtime(session=boto3.Session(region_name="us-east-1"), poll=0.2,
                   report=report or (lambda _: None))


def bench(count: int, tmp: Path, repeat: int) -> dict[str, float]:
    spec = tmp / f"boot-{count}.yaml"
    spec.write_text(spec_text("boot", count, placement_group=False))
    first = do_up(str(spec), yes=True, rt=_runtime(), timeout=600).bootstrap
    assert first is not None and first.ok and first.bodies_run > 0
    walls, stages = [], []
    before = nodecpu.sample(settle=1.0)
    try:
        for _ in range(repeat):
            clock = Clock()
            start = time.perf_counter()
            again = do_up(str(spec), yes=True, rt=_runtime(clock), timeout=600).bootstrap
            walls.append(time.perf_counter() - start)
            stages.append(clock.bootstrap)
            assert again is not None and again.bodies_run == 0, "a no-op up ran a step"
        spent = nodecpu.split(before, nodecpu.sample(settle=0.3))
    finally:
        do_down(str(spec), yes=True, rt=_runtime())
    per_run = nodecpu.CpuSplit(spent.nodes / repeat, spent.sandbox / repeat,
                               spent.client / repeat)
    return {"nodes": count, "wall": statistics.median(walls), "cpu": per_run,
            "bootstrap": statistics.median(stages), "first_steps": first.bodies_run}


def report(rows: list[dict[str, float]], repeat: int) -> None:
    print(f"no-op `up` (all receipts present), sandbox, median of {repeat}")
    print(f"{'nodes':>5} {'wall s':>7} {'ratio':>6} {'bootstrap s':>11} {'ratio':>6}")
    base, boot = rows[0]["wall"], rows[0]["bootstrap"]
    for r in rows:
        print(f"{r['nodes']:>5} {r['wall']:>7.2f} {r['wall'] / base:>6.2f} "
              f"{r['bootstrap']:>11.2f} {r['bootstrap'] / boot:>6.2f}")
    print("\n".join(nodecpu.table([(r["nodes"], r["cpu"], r["wall"]) for r in rows],
                                   "no-op up, per run")))
    ratio = rows[-1]["wall"] / base
    print(f"{rows[-1]['nodes']} nodes / {rows[0]['nodes']} node(s): {ratio:.2f}x "
          f"(goal at most {GOAL_RATIO:g}x: {'met' if ratio <= GOAL_RATIO else 'NOT met'})")
    for line in nodecpu.out_of_reach(rows[-1]["nodes"], rows[-1]["cpu"], base, GOAL_RATIO,
                                     "no-op `up`"):
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_bootstrap needs root: the sandbox runs an sshd per node")
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        stop = _start(Path(tmpdir))
        try:
            rows = [bench(int(n), Path(tmpdir), args.repeat) for n in args.sizes.split(",")]
        finally:
            stop()  # type: ignore[operator]
    report(rows, args.repeat)


if __name__ == "__main__":
    main()
