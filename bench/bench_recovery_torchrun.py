"""How long a torchrun job trains without a node it lost, both ways (issue 42): elastic
(``train.elastic``: the others go on smaller while the node is replaced) and stop,
replace, restart (today's path, MXNet's too), with the same notice.

    sudo .venv/bin/python bench/bench_recovery_torchrun.py [--sizes 2,4] [--scale 1]

Needs root (the sandbox's sshd per node) and the torch interpreter scripts/install.sh
makes (tests/support.py's ``torch_python``). In a sandbox of its own (``--timings
aws:SCALE``), per size, c5.large on-demand nodes with EFS; per way, the DDP example
(checkpoint every step to EFS, gloo on CPU) gets a notice (EC2's two minutes x SCALE) on
its last worker once rank 0 is at step 3. Measured from the notice: until rank 0 trains
again at any size (its first step after a start), until it trains at the full size again,
and the samples lost (steps trained again after a restart, x the batch x the world).
Each job must end with every rank OK at the full size; `down` leaves nothing tagged.
The goal (issue 42): elastic trains again within 15 s of the notice at aws:1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_recovery import SECTIONS as MXNET_SECTIONS  # noqa: E402
from bench.bench_recovery import (  # noqa: E402
    Tape,
    down,
    fail,
    grace,
    options,
    runtime,
    sandboxed,
)
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.jobs.results import JobOutcome  # noqa: E402
from clusterkit.node.interruption import POLL  # noqa: E402
from clusterkit.training.topology import RDZV_CONF  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "torchrun_ddp.py"
PAUSE, BATCH = 0.3, 32  # seconds after each step; the example's batch per rank
GOAL_S = 15.0  # issue 42: elastic trains again within this of the notice, at aws:1
# rank 0's lines, from whichever node holds it: a new rendezvous round may give rank 0 to
# another node than the master (with 3 of 4 left, often a worker)
RANK0 = re.compile(r"^\[([^/\]]+)/torchrun\] ddp rank 0: (world (\d+) of (\d+)|step (\d+)/)")
RESUMED = re.compile(r"^\[([^/\]]+)/torchrun\] checkpoint: resumed from step (\d+)")
# today's MXNet figures (docs/howto/recovery.md, aws:0.1, no standby): notice -> running
MXNET_AT_01 = {2: 7.27, 4: 12.77}
# bench_recovery's spec sections, the job made the DDP example's (torch's site-packages,
# gloo on loopback); ``elastic``: the train.elastic line, or nothing
SECTIONS = MXNET_SECTIONS.replace("framework: mxnet", "framework: torchrun").replace(
    "python3 resumable.py 1 0 fresh",
    "python3 torchrun_ddp.py --steps {steps} --step-seconds {pause} --checkpoint-every 1"
).replace("  servers_per_node: 1\n", "").replace(
    "PYTHONPATH: {site}}}", "PYTHONPATH: {site}, GLOO_SOCKET_IFNAME: lo}}") + "{elastic}"


@dataclass
class Way:
    """One way's figures (seconds from the notice; None: never)."""

    way: str
    again_s: float | None
    full_s: float | None
    idle_s: float
    steps_lost: int
    samples_lost: int


def master_marks(lines: list[tuple[float, str]], since: float) -> dict[str, float | int | None]:
    """From rank 0's lines after ``since`` (the notice): ``again``, its first step after
    a start at any size; ``full``, its first step after a start at the full size;
    ``idle``, the seconds without a step around those starts (from the last step before
    each start to the first after it); ``lost``, the steps trained again (the last step
    before each start less the step it resumed from). Rank 0 is the node whose line
    ``world W of F`` came last (each start says it); another node's rank-0 lines (a
    group that is ending) do not count."""
    marks: dict[str, float | int | None] = {"again": None, "full": None, "idle": 0.0,
                                            "lost": 0}
    started = started_full = False
    last_step, last_at, idle_from, holder = 0, None, None, None
    for at, line in lines:
        if (r := RESUMED.match(line)) and at >= since and r[1] == holder:
            marks["lost"] = int(marks["lost"] or 0) + max(0, last_step - int(r[2]))
        if not (m := RANK0.match(line)):
            continue
        if m[3] is not None:
            holder = m[1]
            if at >= since:
                started, started_full = True, m[3] == m[4]
                idle_from = last_at if idle_from is None else idle_from
            continue
        if holder is not None and m[1] != holder:
            continue
        last_step, last_at = int(m[5]), at
        if idle_from is not None:
            marks["idle"] = float(marks["idle"] or 0) + at - idle_from
            idle_from = None
        if started and marks["again"] is None:
            marks["again"] = at
        if started and started_full and marks["full"] is None:
            marks["full"] = at
    return marks


def torch_site() -> str:
    from tests.support import torch_python

    return subprocess.run([torch_python(), "-c", "import sysconfig; print(sysconfig."
                           "get_paths()['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()


def write_spec(tmp: Path, count: int, notice: float, elastic: bool, steps: int) -> Path:
    text = spec_text("el" if elastic else "rs", count, placement_group=False)
    name = text.split("\n", 1)[0].removeprefix("name: ")
    spec = tmp / f"{name}.yaml"
    spec.write_text(text + SECTIONS.format(
        steps=steps, pause=PAUSE, site=torch_site(), grace=grace(notice),
        elastic=f"  elastic: {{min: {count - 1}}}\n" if elastic else ""))
    return spec


def one_way(tmp: Path, count: int, scale: float, elastic: bool) -> Way:
    """A cluster of ``count`` nodes, `up`, the job with its notice, `down`."""
    from clusterkit.cluster.jobs.train import do_train
    from clusterkit.cluster.provision.up import do_up
    from clusterkit_sandbox.imds import do_interrupt

    notice = 120 * scale
    steps = 3 + int((notice + 60) / PAUSE)  # on past the grace and the replacement
    spec = write_spec(tmp, count, notice, elastic, steps)
    name = spec.stem
    tape, done = Tape(), []
    try:
        do_up(str(spec), yes=True, rt=runtime(), timeout=1800)
        thread = threading.Thread(target=lambda: done.append(do_train(
            str(spec), workdir_option=str(tmp / "work"), out=tape, max_recoveries=1,
            rt=runtime(tape))))
        thread.start()
        deadline = time.time() + 600
        while not any("ddp rank 0: step 3/" in line for _, line in tape.lines):
            if time.time() > deadline or not thread.is_alive():
                fail(f"{name}: the job never reached step 3", tape)
            time.sleep(0.05)
        do_interrupt(str(tmp / "sandbox"), name, f"worker-{count - 1}", notice=notice)
        posted = time.time()
        thread.join(1800)
        check(name, done, tape, count, elastic)
        marks = master_marks(tape.lines, posted)
    finally:
        down(name)
    again, full, lost = marks["again"], marks["full"], int(marks["lost"] or 0)
    return Way("elastic" if elastic else "stop, replace, restart",
               None if again is None else float(again) - posted,
               None if full is None else float(full) - posted, float(marks["idle"] or 0),
               lost, lost * BATCH * count)


def check(name: str, done: list[JobOutcome], tape: Tape, count: int, elastic: bool) -> None:
    """The job succeeded after one replacement, every rank OK at the full size."""
    oks = [line for _, line in tape.lines if re.search(rf"ddp rank \d+/{count} .* OK$", line)]
    if not done or not done[0].ok or len(done[0].recoveries) != 1 or not oks:
        fail(f"{name}: {done[0].state.value if done else 'no outcome'}, "
             f"{len(done[0].recoveries) if done else 0} recoveries, OK lines {len(oks)}", tape)
    if elastic and done[0].final is not None and done[0].final.recovery.restart_count:
        fail(f"{name}: the elastic job was restarted", tape)


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(scale: float, sizes: list[dict]) -> list[str]:
    out = [f"torchrun recovery, both ways, at aws:{scale:g} (notice {120 * scale:g} s)",
           "| nodes | way | trains again s | full size again s | idle s | steps lost | "
           "samples lost | MXNet today (aws:0.1) s |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for size in sizes:
        for w in size["ways"]:
            out.append(f"| {size['nodes']} | {w['way']} | {cell(w['again_s'])} | "
                       f"{cell(w['full_s'])} | {cell(w['idle_s'])} | {w['steps_lost']} | "
                       f"{w['samples_lost']} | "
                       f"{cell(MXNET_AT_01.get(size['nodes']))} |")
    floor = f"the supervisor's {POLL:g} s metadata poll + the rendezvous' {RDZV_CONF}"
    for size in sizes:
        elastic = next(w for w in size["ways"] if w["way"] == "elastic")
        met = elastic["again_s"] is not None and elastic["again_s"] <= GOAL_S
        where = "" if scale == 1 else f" (measured at aws:{scale:g}, the goal is at aws:1)"
        out.append(f"goal: elastic trains again within {GOAL_S:g} s on {size['nodes']} "
                   f"nodes: {'met' if met else 'missed'} ({cell(elastic['again_s'])} s)"
                   f"{where}; floor: {floor}, then torch's start on this machine's "
                   f"{os.cpu_count()} cores")
    return out


def main() -> int:
    args = options(__doc__ or "", 1.0, warm_up=False)
    if args is None:
        return 0
    sizes = sandboxed(args.scale, {EXAMPLE.name: EXAMPLE.read_text()}, lambda tmp: [
        {"nodes": int(n), "ways": [asdict(one_way(tmp, int(n), args.scale, elastic))
                                   for elastic in (True, False)]}
        for n in args.sizes.split(",")])
    if args.json:
        print(json.dumps({"scale": args.scale, "sizes": sizes}, indent=1))
    else:
        print("\n".join(report(args.scale, sizes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
