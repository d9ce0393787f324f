"""Training launch at scale: `clusterkit train` beside MXNet's own ``tools/launch.py``
(ssh mode) on the same sandbox nodes, in the same run, with the same tiny job
(examples/mxnet_dist_sync.py, a few steps; one server and one worker per node, the
scheduler on the master for clusterkit, on the launching host for launch.py).

    sudo .venv/bin/python bench/bench_train.py                 # needs root: sshd per node
    sudo .venv/bin/python bench/bench_train.py --sizes 1,4,8 --steps 3 --repeat 3

For each launcher and size: the time from the command's start until every process of
the job (scheduler, N servers, N workers) runs, until the command returns with the
job complete (every worker checked its result: ``OK`` N times), and the CPU seconds the
whole machine spent meanwhile (/proc/stat; on a few cores the job's own CPU bounds the
wall time from below, so what a launcher burns besides shows there). A process is counted
from /proc (the sandbox nodes share this machine's PID space) when it is a python whose
environment holds this run's ``BENCH_RUN`` id. The median of ``--repeat`` runs; the two
launchers alternate. Goal: clusterkit no slower than launch.py.

The shim launch.py needs on Python >= 3.9 (``dmlc_tracker`` calls ``Thread.isAlive``,
removed in 3.9): it is started as ``python -c SHIM launch.py ...``, where SHIM aliases
``Thread.isAlive`` to ``Thread.is_alive`` and then runs launch.py as ``__main__``;
nothing else of it changes. Its ssh is the system ssh with the sandbox cluster's login
(user, key, known_hosts) from a generated ``-F`` config: a wrapper named ``ssh`` first on
its PATH. ``--host-ip=127.0.0.1`` (one word: launch.py passes options it does not know
to dmlc_tracker at the end of the command) names the scheduler's address (the tracker
would guess a non-loopback interface).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_bootstrap import _runtime, _start  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.jobs.nodejobs import open_job_cluster  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mxnet_dist_sync.py"
CLI = str(Path(sys.executable).with_name("clusterkit"))
SITE = sysconfig.get_paths()["purelib"]
LAUNCH = Path(SITE) / "mxnet" / "tools" / "launch.py"
SHIM = ("import runpy, sys, threading; threading.Thread.isAlive = threading.Thread.is_alive; "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
TRAIN = """\
train:
  framework: mxnet
  python: /usr/bin/python3
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}, BENCH_RUN: clusterkit}}
  packages: []
"""
# Every role runs it under launch.py (the tracker's one command); under clusterkit only
# the workers do. No option words: launch.py would move them (parse_known_args).
RUN_SH = """\
#!/bin/sh
export BENCH_RUN="$1" PYTHONPATH={site} OMP_NUM_THREADS=1
exec /usr/bin/python3 mxnet_dist_sync.py --steps {steps}
"""
TIMEOUT = 300


def job_pids(run_id: str) -> set[int]:
    """Python processes on this machine (every sandbox node) of the run ``run_id``."""
    needle, found = f"BENCH_RUN={run_id}".encode(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not Path(f"/proc/{entry}/comm").read_text().startswith("python"):
                continue
            if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.add(int(entry))
        except OSError:
            continue
    return found


def busy_seconds() -> float:
    """CPU seconds this machine has spent, all cores, every process (/proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # not idle, iowait


# clusterkit's own lines that end a phase of its start (the time each is first printed)
MARKS = {"starting": re.compile(r"^starting job "),  # imports, SSH, the nodes' prepare
         "started": re.compile(r"^job \S+ started on ")}  # job files, supervisors up


def timed(argv: list[str], run_id: str, want: int, **kwargs: object) -> dict[str, float]:
    """Run ``argv``; when ``want`` processes of the run were first seen at once, when the
    last of them was last seen (polled every 20 ms), when clusterkit printed each of
    ``MARKS``, when it returned, the CPU the whole machine spent meanwhile, and its
    output (for the check)."""
    seen: dict[str, float] = {}
    done = threading.Event()
    busy = busy_seconds()
    start = time.perf_counter()

    def watch() -> None:
        pids: set[int] = set()
        while not done.is_set() and "running" not in seen:  # a scan of /proc each time
            pids = job_pids(run_id)
            if len(pids) >= want:
                seen["running"] = time.perf_counter() - start
            time.sleep(0.02)
        while not done.is_set() and pids:  # then only those: as cheap as before
            pids = {p for p in pids if Path(f"/proc/{p}").exists()}
            seen["ended"] = time.perf_counter() - start
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL,
                            **kwargs)  # type: ignore[call-overload]
    out = []
    assert proc.stdout is not None
    for line in proc.stdout:
        out.append(line)
        for mark, pattern in MARKS.items():
            if mark not in seen and pattern.match(line):
                seen[mark] = time.perf_counter() - start
    proc.wait(timeout=TIMEOUT)
    wall = time.perf_counter() - start
    cpu = busy_seconds() - busy
    done.set()
    watcher.join()
    nan = float("nan")
    return {"running": seen.get("running", nan), "done": wall, "cpu": cpu,
            "ended": seen.get("ended", nan), "starting": seen.get("starting", nan),
            "started": seen.get("started", nan), "rc": proc.returncode, "out": "".join(out)}


def ssh_wrapper(tmp: Path, cluster: str) -> Path:
    """A bin dir whose ``ssh`` logs in to the sandbox nodes as clusterkit does."""
    jc = open_job_cluster(_runtime(), cluster)
    config = tmp / f"ssh_config-{cluster}"
    config.write_text("Host *\n"
                      f"    User {jc.login.user}\n"
                      f"    IdentityFile {Path(os.environ['HOME']) / '.ssh' / 'id_ed25519'}\n"
                      "    IdentitiesOnly yes\n    BatchMode yes\n"
                      f"    UserKnownHostsFile {jc.login.known_hosts}\n")
    bindir = tmp / f"bin-{cluster}"
    bindir.mkdir()
    real = shutil.which("ssh")
    (bindir / "ssh").write_text(f'#!/bin/sh\nexec {real} -F {config} "$@"\n')
    (bindir / "ssh").chmod(0o755)
    return bindir


def hostfile(tmp: Path, cluster: str) -> Path:
    """launch.py's hosts: ``address:port`` per node (the address is DMLC_NODE_HOST)."""
    from clusterkit.remote.address import ssh_address

    jc = open_job_cluster(_runtime(), cluster)
    path = tmp / f"hosts-{cluster}"
    path.write_text("".join(f"{ssh_address(n, via_gateway=True)}:{jc.login.port}\n"
                            for n in jc.nodes))
    return path


def run_clusterkit(spec: Path, template: str, work: Path, count: int) -> dict[str, float]:
    run_id = "ck-" + uuid.uuid4().hex[:8]
    spec.write_text(template.replace("BENCH_RUN: clusterkit", f"BENCH_RUN: {run_id}"))
    return timed([CLI, "train", str(spec), "--workdir", str(work), "--", "sh", "run.sh",
                  run_id], run_id, 2 * count + 1)


def run_launch(work: Path, hosts: Path, bindir: Path, count: int) -> dict[str, float]:
    run_id = "ml-" + uuid.uuid4().hex[:8]
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    argv = [sys.executable, "-c", SHIM, str(LAUNCH), "-n", str(count), "-s", str(count),
            "-H", str(hosts), "--launcher", "ssh", "--host-ip=127.0.0.1",
            "sh", "run.sh", run_id]
    return timed(argv, run_id, 2 * count + 1, cwd=str(work), env=env)


def check(result: dict, count: int, who: str) -> None:
    ok = result["out"].count(" OK")
    if result["rc"] != 0 or ok != count or "MISMATCH" in result["out"]:
        raise SystemExit(f"{who} on {count} node(s) failed (exit {result['rc']}, "
                         f"{ok} OK):\n{result['out'][-3000:]}")


def bench(count: int, tmp: Path, steps: int, repeat: int) -> dict[str, object]:
    spec = tmp / f"train-{count}.yaml"
    template = spec_text("trb", count, placement_group=False) + TRAIN.format(site=SITE)
    spec.write_text(template)
    # Under /var/tmp, not /tmp: the nodes see the host's files (not its /tmp) where
    # launch.py's ssh commands `cd` to the launcher's own directory.
    work = Path(tempfile.mkdtemp(prefix=f"bench-train-{count}-", dir="/var/tmp"))
    shutil.copy(EXAMPLE, work / EXAMPLE.name)
    (work / "run.sh").write_text(RUN_SH.format(site=SITE, steps=steps))
    cluster = template.split("\n", 1)[0].split(": ", 1)[1]
    do_up(str(spec), yes=True, rt=_runtime(), timeout=600)
    rows: dict[str, list[dict]] = {"clusterkit": [], "launch.py": []}
    try:
        bindir, hosts = ssh_wrapper(tmp, cluster), hostfile(tmp, cluster)
        for _ in range(repeat):
            rows["clusterkit"].append(run_clusterkit(spec, template, work, count))
            check(rows["clusterkit"][-1], count, "clusterkit")
            rows["launch.py"].append(run_launch(work, hosts, bindir, count))
            check(rows["launch.py"][-1], count, "launch.py")
            time.sleep(1)  # launch.py's remote ssh sessions end after it returns
    finally:
        do_down(str(spec), yes=True, rt=_runtime())
        shutil.rmtree(work, ignore_errors=True)
    return {"nodes": count, **{f"{who} {what}": statistics.median(r[what] for r in runs)
                               for who, runs in rows.items()
                               for what in ("running", "done", "cpu", "ended", "starting",
                                            "started")}}


def report(rows: list[dict], steps: int, repeat: int) -> None:
    print(f"`clusterkit train` vs MXNet tools/launch.py (ssh), sandbox, mxnet_dist_sync "
          f"--steps {steps}, median of {repeat}; seconds from the command's start")
    print(f"{'nodes':>5} {'procs':>5} | {'ck running':>10} {'ck done':>8} {'ck cpu':>7} | "
          f"{'mx running':>10} {'mx done':>8} {'mx cpu':>7} | {'ratio run':>9} "
          f"{'ratio done':>10}")
    for r in rows:
        n = int(r["nodes"])
        run = r["clusterkit running"] / r["launch.py running"]
        done = r["clusterkit done"] / r["launch.py done"]
        print(f"{n:>5} {2 * n + 1:>5} | {r['clusterkit running']:>10.2f} "
              f"{r['clusterkit done']:>8.2f} {r['clusterkit cpu']:>7.2f} | "
              f"{r['launch.py running']:>10.2f} {r['launch.py done']:>8.2f} "
              f"{r['launch.py cpu']:>7.2f} | {run:>9.2f} {done:>10.2f}")
    print("ratio = clusterkit / launch.py (goal: at most 1.00, clusterkit no slower); cpu = "
          f"CPU seconds the whole machine ({os.cpu_count()} cores) spent during the run: "
          "the job's processes, the launcher, ssh/sshd, supervisors, the sandbox")
    cores = os.cpu_count() or 1
    print(f"the emulation's share: every node and the client share these {cores} cores with "
          "the job, so the CPU clusterkit spends beyond launch.py (client, supervisors, "
          "followers; on a real cluster the client's machine and each node's own cores) "
          "delays the job here by about (ck cpu - mx cpu) / cores:")
    for r in rows:
        extra = max(0.0, r["clusterkit cpu"] - r["launch.py cpu"]) / cores
        done = r["clusterkit done"] - extra
        print(f"  {int(r['nodes'])} node(s): {extra:.2f} s; done without it {done:.2f}, "
              f"ratio {done / r['launch.py done']:.2f}")
    print("where the time goes (medians, seconds): clusterkit printed `starting job` "
          "(its start, imports, SSH to every node, each node's prepare: running jobs, "
          "free ports, $HOME), then `started` (job.json, the workdir and the supervisor "
          "unpacked on each node, each supervisor daemonized); the job's processes "
          "running, the last one gone, and the command's return")
    for r in rows:
        print(f"  {int(r['nodes'])} node(s): clusterkit starting {r['clusterkit starting']:.2f}"
              f" started {r['clusterkit started']:.2f} running {r['clusterkit running']:.2f}"
              f" last gone {r['clusterkit ended']:.2f} returned {r['clusterkit done']:.2f}"
              f" | launch.py running {r['launch.py running']:.2f} last gone "
              f"{r['launch.py ended']:.2f} returned {r['launch.py done']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_train needs root: the sandbox runs an sshd per node")
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        stop = _start(Path(tmpdir))
        try:
            rows = [bench(int(n), Path(tmpdir), args.steps, args.repeat)
                    for n in args.sizes.split(",")]
        finally:
            stop()  # type: ignore[operator]
    report(rows, args.steps, args.repeat)


if __name__ == "__main__":
    main()
