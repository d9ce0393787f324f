"""What observing a job costs: the node sampler's CPU and memory on this machine, and
`clusterkit top NAME --once` latency on sandbox clusters of 1, 4 and 16 nodes running a
job (goal: 16 nodes at most 1.5x one node's latency; the sampler under 1% of a core).

    sudo .venv/bin/python bench/bench_observe.py                  # needs root (sshd per node)
    sudo .venv/bin/python bench/bench_observe.py --sizes 1,4 --repeat 3 --samples 60

The sampler part samples this machine's real /proc with the job's own processes (this
one), once per ``--interval`` (default 2 s, the spec's default) made back to back, and
counts the process's CPU time per sample: the fraction of a core it would take at that
interval. This machine has no GPU: the sampler's ``nvidia-smi`` call is timed with a
stand-in script printing a p4d's 8 GPUs as CSV (an exec of a small program, the main
cost), and without any (``nvidia-smi`` missing). Memory: the peak RSS of a process that
only imports the sampler and runs it.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_bootstrap import _runtime, _start  # noqa: E402
from bench.bench_first_step import busy_seconds  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402
from clusterkit.node.sampler import Sampler  # noqa: E402

CLI = str(Path(sys.executable).with_name("clusterkit"))
FAKE_SMI = """#!/bin/sh
for i in 0 1 2 3 4 5 6 7; do
  echo "$i, NVIDIA A100-SXM4-40GB, 97, 30011, 40960, 301.52, 61"
done
"""
TRAIN = """\
train:
  framework: mxnet
  command: sleep 600
  servers_per_node: 1
  workers_per_node: 1
  packages: []
"""


def sampler_cost(tmp: Path, samples: int, smi: str) -> tuple[float, int]:
    """CPU seconds per sample of this process, and the metrics file's bytes per sample."""
    job = tmp / f"job-{Path(smi).name}"
    job.mkdir()
    (job / "worker-0.log").write_text("")
    sampler = Sampler(str(job), pids_fn=lambda: {os.getpid()},
                      logs=[str(job / "worker-0.log")], interval=0.0, nvidia_smi=smi)
    sampler.step(0.0)  # the priming sample
    before = os.times()
    for i in range(1, samples + 1):
        with (job / "worker-0.log").open("a") as log:
            log.write("Epoch[0] Batch [0-20]\tSpeed: 512.50 samples/sec\n")
        sampler.step(float(i))
    after = os.times()
    children = (after.children_user + after.children_system) - \
        (before.children_user + before.children_system)
    own = (after.user + after.system) - (before.user + before.system)
    return (own + children) / samples, (job / "metrics.jsonl").stat().st_size // (samples + 1)


def sampler_rss(tmp: Path) -> tuple[int, int]:
    """Peak RSS (KiB) of a bare python, and of it once it imported the sampler and
    sampled 20 times."""
    # VmHWM, not ru_maxrss: a forked child's ru_maxrss keeps the parent's across exec
    code = ("import sys; sys.path.insert(0, %r); "
            "hwm = lambda: int([l for l in open('/proc/self/status') if l.startswith('VmHWM')]"
            "[0].split()[1]); base = hwm(); "
            "from clusterkit.node.sampler import Sampler; "
            "s = Sampler(%r, pids_fn=lambda: set(), interval=0.0, nvidia_smi='/nonexistent'); "
            "[s.step(float(i)) for i in range(20)]; print(base, hwm())")
    job = tmp / "rss"
    job.mkdir()
    out = subprocess.run([sys.executable, "-c", code % (str(Path(__file__).parents[1]),
                                                        str(job))],
                         capture_output=True, text=True, check=True)
    base, peak = out.stdout.split()
    return int(base), int(peak)


def top_latency(tmp: Path, count: int, repeat: int) -> tuple[float, float, float]:
    """Median seconds of `top NAME --once --json` on a ``count``-node cluster with a job,
    and the median CPU seconds of the `top` process and of the rest of the machine (the
    emulated nodes' sshd and observers, the sandbox) meanwhile."""
    spec = tmp / f"observe-{count}.yaml"
    spec.write_text(spec_text("obs", count, placement_group=False) + TRAIN)
    name = spec.read_text().split("\n", 1)[0].split(": ", 1)[1]
    do_up(str(spec), yes=True, rt=_runtime(), timeout=900)
    try:
        subprocess.run([CLI, "train", str(spec), "--detach"], check=True,
                       capture_output=True, timeout=300)
        time.sleep(5)  # a few samples on every node
        walls, clients, others = [], [], []
        for _ in range(repeat):
            start, busy, before = time.monotonic(), busy_seconds(), os.times()
            run = subprocess.run([CLI, "top", name, "--once", "--json"], capture_output=True,
                                 text=True, timeout=300)
            walls.append(time.monotonic() - start)
            after = os.times()
            client = (after.children_user + after.children_system
                      - before.children_user - before.children_system)
            clients.append(client)
            others.append(busy_seconds() - busy - client)
            if run.returncode != 0 or '"job_id"' not in run.stdout:
                raise SystemExit(f"top on {count} node(s) failed: {run.stderr[-2000:]}")
        subprocess.run([CLI, "stop", name], capture_output=True, timeout=300)
        return statistics.median(walls), statistics.median(clients), statistics.median(others)
    finally:
        do_down(str(spec), yes=True, rt=_runtime())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        smi = tmp / "nvidia-smi"
        smi.write_text(FAKE_SMI)
        smi.chmod(0o755)
        print(f"sampler, {args.samples} samples, at one per {args.interval:g} s:")
        for label, program in (("8 GPUs (stand-in nvidia-smi)", str(smi)),
                               ("no GPU (no nvidia-smi)", str(tmp / "missing"))):
            cpu, size = sampler_cost(tmp, args.samples, program)
            print(f"  {label:<30} {cpu * 1000:7.2f} ms CPU per sample = "
                  f"{100 * cpu / args.interval:.3f}% of a core (goal < 1%); "
                  f"{size} bytes per sample")
        base, peak = sampler_rss(tmp)
        print(f"  peak RSS: {peak} KiB for a python running the sampler, {peak - base} KiB "
              f"more than the bare interpreter's {base} KiB")
        if os.geteuid() != 0:
            print("top --once latency: skipped (needs root: an sshd per sandbox node)")
            return
        stop = _start(tmp)
        try:
            rows = [(int(n), top_latency(tmp, int(n), args.repeat))
                    for n in args.sizes.split(",")]
        finally:
            stop()  # type: ignore[operator]
    base = rows[0][1][0]
    cores = os.cpu_count() or 1
    print(f"`clusterkit top NAME --once --json`, sandbox, median of {args.repeat}:")
    for count, (wall, client, other) in rows:
        print(f"  {count:>3} node(s): {wall:6.2f} s  ratio to {rows[0][0]} node(s) "
              f"{wall / base:.2f} (goal for 16: at most 1.50); CPU s: top {client:.2f}, "
              f"emulated nodes and sandbox {other:.2f} (/ {cores} cores = "
              f"{other / cores:.2f} s of wall time not spent on real nodes' own CPUs)")


if __name__ == "__main__":
    main()
