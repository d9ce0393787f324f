"""How long a recovery takes: seconds from a spot interruption notice to every worker's
next step after `train --max-recoveries 1` replaced the lost node, beside a fresh `up` +
`train` of the same nodes to every worker's first step, in the same run.

    sudo .venv/bin/python bench/bench_recovery.py [--sizes 2,4] [--scale 0.1] [--json]

Needs root (the sandbox's sshd per node): without it, it says so and exits 0. In a
sandbox of its own (``--timings aws:SCALE``), per size, c5.large on-demand nodes with EFS:
fresh is `up` + `train` of a one-step job until every worker logged ``step 1``; then each
of RECOVERIES runs a job that checkpoints every step to EFS, posts a notice (EC2's two
minutes x SCALE) on the last worker once every worker is at step 3, and measures to every
worker's first step after its ``resumed from ... restart 1``, split by the recovery's
record and `train`'s progress. The job must end with an uninterrupted run's result;
`down` must leave nothing tagged.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NoReturn, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import resumable  # noqa: E402
from bench.bench_first_step import leftovers, start_sandbox  # noqa: E402
from bench.resumable import want  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.jobs.results import JobOutcome  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.events import Event, Kind, Stage  # noqa: E402
from clusterkit.node.interruption import MARGIN, POLL  # noqa: E402

T = TypeVar("T")
REGION = "us-east-1"
PAUSE = 0.5  # seconds between steps
LINE = re.compile(r"^\[(\S+)/(worker-\d+)\] (.*)$")
STEP = re.compile(r"^step (\d+)$")
SECTIONS = """\
storage:
  efs: {{mount: /efs, deletion_policy: delete}}
train:
  framework: mxnet
  python: /usr/bin/python3
  command: python3 resumable.py 1 0 fresh
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}}}
  packages: []
  checkpoint_dir: /efs/ckpt
  checkpoint_grace: {grace}
  node_timeout: 15
"""
PHASES = ("notice -> seen", "-> stopped", "-> bootstrapped", "-> running", "-> stepping")


# -- pure helpers ----------------------------------------------------------------------

def job_steps(notice: float) -> int:
    """Steps enough that the job still runs when the notice's stop comes (step 3, the
    notice, its grace) and again after the restart."""
    return 3 + int((notice + 20) / PAUSE)


def grace(notice: float) -> float:
    """``train.checkpoint_grace`` inside the notice: the supervisor's poll and MARGIN
    before the instance goes left out, at least 1 s, at most the default 90 s."""
    return min(90.0, max(1.0, notice - MARGIN - POLL))


def worker_lines(lines: list[tuple[float, str]]) -> list[tuple[float, str, str]]:
    """(time, ``node/worker-N``, text) of each worker's line of train's output."""
    return [(at, f"{m[1]}/{m[2]}", m[3]) for at, line in lines if (m := LINE.match(line))]


def first_steps(lines: list[tuple[float, str]], restart: int | None = None,
                least: int = 1) -> dict[str, float]:
    """Each worker's first ``step N`` (N >= ``least``), after its ``resumed from ...
    restart R`` line when ``restart`` is given: worker -> when it arrived."""
    armed: set[str] = set()
    found: dict[str, float] = {}
    for at, who, text in worker_lines(lines):
        if restart is not None and text.endswith(f" restart {restart}") \
                and text.startswith("resumed from step"):
            armed.add(who)
        elif (m := STEP.match(text)) and int(m[1]) >= least \
                and (restart is None or who in armed):
            found.setdefault(who, at)
    return found


def results(lines: list[tuple[float, str]]) -> dict[str, list[float]]:
    """Each worker's last ``RESULT [...]``."""
    return {who: json.loads(text[7:]) for _, who, text in worker_lines(lines)
            if text.startswith("RESULT ")}


def phases(marks: list[float | None]) -> list[float | None]:
    """Seconds between consecutive marks; a missing mark's phase joins the next."""
    out: list[float | None] = []
    last = marks[0]
    for mark in marks[1:]:
        out.append(None if mark is None or last is None else mark - last)
        last = mark if mark is not None else last
    return out


# -- the bench -------------------------------------------------------------------------

@dataclass
class Tape:
    """train's output (each line with when it arrived) and the progress events."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    events: list[tuple[float, Event]] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append((time.time(), event))

    def write(self, text: str) -> int:
        now = time.time()
        self.lines += [(now, line) for line in text.splitlines() if line.strip()]
        return len(text)

    def flush(self) -> None:
        """train's output is a file to it."""


@dataclass
class Cluster:
    """A measured cluster; its spec lies in the bench's temp dir beside work/, sandbox/."""

    name: str
    spec: Path
    count: int
    notice: float  # seconds: EC2's two minutes x scale

    @property
    def work(self) -> str:
        return str(self.spec.parent / "work")

    @property
    def sandbox(self) -> str:
        return str(self.spec.parent / "sandbox")


@dataclass
class Recovered:
    """One recovery measurement: notice -> every worker stepping, its PHASES, and the
    recovery record's own figures."""

    what: str
    seconds: float
    phases: list[float | None]
    record_to_running: float | None
    node_hours_lost: float | None
    resumed_from: list[int]


def fail(what: str, tape: Tape) -> NoReturn:
    """Fails the bench loudly, with the end of train's output."""
    tail = "\n".join(line for _, line in tape.lines[-30:])
    raise SystemExit(f"{what}:\n{tail}")


def runtime(tape: Tape | None = None) -> Runtime:
    return Runtime.make(region=REGION, report=tape)


def fresh(cl: Cluster) -> tuple[float, float]:
    """`up`, then `train` of one step: (seconds to every worker's first step, of `up`)."""
    from clusterkit.cluster.jobs.train import do_train
    from clusterkit.cluster.provision.up import do_up

    tape, start = Tape(), time.time()
    do_up(str(cl.spec), yes=True, rt=runtime(tape), timeout=900)
    up = time.time() - start
    outcome = do_train(str(cl.spec), workdir_option=cl.work, out=tape, rt=runtime(tape))
    firsts = first_steps(tape.lines)
    if not outcome.ok or len(firsts) != cl.count:
        fail(f"fresh train on {cl.count} node(s): {outcome.state.value}", tape)
    return max(firsts.values()) - start, up


def recovery(cl: Cluster, what: str, run: str,
             post: Callable[[Cluster, Tape], float]) -> Recovered:
    """A job (checkpoints under ``run``) at step 3 on every worker, ``post`` (returns
    when the notice was posted), `train` recovering it; measured and checked."""
    from clusterkit.cluster.jobs.train import do_train

    tape, steps = Tape(), job_steps(cl.notice)
    done: list[JobOutcome] = []
    command = ("python3", "resumable.py", str(steps), str(PAUSE), run)
    thread = threading.Thread(target=lambda: done.append(do_train(
        str(cl.spec), command=command, workdir_option=cl.work, out=tape,
        max_recoveries=1, rt=runtime(tape))))
    thread.start()
    deadline = time.time() + 300
    while len(first_steps(tape.lines, least=3)) < cl.count:
        if time.time() > deadline or not thread.is_alive():
            fail(f"{what}: the job never reached step 3 on every worker", tape)
        time.sleep(0.05)
    posted = post(cl, tape)
    thread.join(900)
    return measured(cl, what, tape, done, steps, posted, standby=run == "standby")


def measured(cl: Cluster, what: str, tape: Tape, done: list[JobOutcome], steps: int,
             posted: float, standby: bool = False) -> Recovered:
    """The recovery's figures, once the job is checked: it succeeded after one recovery,
    every worker resumed from a checkpoint and ended with the uninterrupted result."""
    if not done or not done[0].ok or len(done[0].recoveries) != 1:
        fail(f"{what}: {done[0].state.value if done else 'no outcome'}, "
             f"{len(done[0].recoveries) if done else 0} recoveries", tape)
    rec = done[0].recoveries[0]
    resumed = [int(m[1]) for _, _, text in worker_lines(tape.lines)
               if (m := re.match(r"resumed from step (\d+) restart 1$", text))]
    got = results(tape.lines)
    stepping = first_steps(tape.lines, restart=1)
    if set(rec.lost) != {f"worker-{cl.count - 1}"} or len(resumed) != cl.count or \
            bool(rec.from_standby) != standby or \
            min(resumed) < 1 or len(stepping) != cl.count or \
            len(got) != cl.count or any(abs(v - want(steps, cl.count)) > 1e-6
                                        for ws in got.values() for v in ws):
        fail(f"{what}: lost {dict(rec.lost)}, resumed {resumed}, results {got}, "
             f"want {want(steps, cl.count)}", tape)
    boot = next((at for at, e in tape.events if at >= rec.stopped and e.stage is Stage.BOOTSTRAP
                 and e.kind is Kind.STAGE_DONE), None)
    end = max(stepping.values())
    return Recovered(what, end - posted,
                     phases([posted, rec.since, rec.stopped, boot, rec.running, end]),
                     rec.seconds_to_running, rec.node_hours_lost, resumed)


def plain_notice(cl: Cluster, _tape: Tape | None = None) -> float:
    """The spot interruption notice on the last worker, no standby."""
    from clusterkit_sandbox.imds import do_interrupt

    do_interrupt(cl.sandbox, cl.name, f"worker-{cl.count - 1}", notice=cl.notice)
    return time.time()


def on_master(cl: Cluster, command: str) -> None:
    from clusterkit.cluster.access.remote_ops import do_exec

    do_exec(cl.name, [command], nodes=["master"], rt=runtime())


def standby_notice(cl: Cluster, tape: Tape) -> float:
    """A rebalance recommendation on the last worker, the job held at its next step
    until the standby `train` launches for it is ready; then the notice (as plain)."""
    import boto3

    from clusterkit_sandbox.imds import find_instance, post
    from clusterkit_sandbox.state import state_dir

    hold = "/efs/ckpt/standby/hold"
    on_master(cl, f"touch {hold}")
    ec2 = boto3.client("ec2", REGION)
    iid = find_instance(ec2, cl.name, cl.count - 1)
    if iid is None:
        fail("standby: no last worker to recommend rebalancing", tape)
    post(state_dir(cl.sandbox), iid, rebalance=True)
    deadline = time.time() + 600
    while not any(e.text.endswith("is ready") for _, e in tape.events):
        if time.time() > deadline:
            fail("standby: not ready within 600 s", tape)
        time.sleep(0.05)
    posted = plain_notice(cl)
    on_master(cl, f"rm -f {hold}")
    return posted


def no_standby(cl: Cluster) -> Recovered:
    return recovery(cl, "notice, no standby", "plain", plain_notice)


def with_standby(cl: Cluster) -> Recovered:
    return recovery(cl, "notice after a standby", "standby", standby_notice)


# Each measurement runs its own job on the cluster (whole again after the one before).
RECOVERIES: tuple[Callable[[Cluster], Recovered], ...] = (no_standby, with_standby)


def write_spec(tmp: Path, prefix: str, count: int, notice: float) -> tuple[Path, str]:
    text = spec_text(prefix, count, placement_group=False)
    name = text.split("\n", 1)[0].removeprefix("name: ")
    (spec := tmp / f"{name}.yaml").write_text(text + SECTIONS.format(
        site=sysconfig.get_paths()["purelib"], grace=grace(notice)))
    return spec, name


def down(name: str) -> None:
    """`down`, then nothing tagged left (asked again for at most 120 s)."""
    from clusterkit.cluster.provision.down import do_down

    do_down(name, yes=True, rt=runtime(), timeout=900)
    deadline = time.time() + 120
    while left := leftovers(name):
        if time.time() > deadline:
            raise SystemExit(f"down {name} left {left}")
        time.sleep(0.5)


def one_size(tmp: Path, count: int, scale: float) -> dict:
    """A cluster of ``count`` nodes: fresh, then every recovery measurement, `down`."""
    spec, name = write_spec(tmp, "rc", count, notice := 120 * scale)
    cl = Cluster(name, spec, count, notice)
    try:
        seconds, up = fresh(cl)
        rows = [asdict(run(cl)) for run in RECOVERIES]
    finally:
        down(name)
    return {"nodes": count, "fresh_s": seconds, "fresh_up_s": up, "recoveries": rows}


def warm_up(tmp: Path) -> None:
    """One 1-node `up` and `down` with EFS, not measured: the endpoint builds each service
    on its first call."""
    from clusterkit.cluster.provision.up import do_up

    spec, name = write_spec(tmp, "warm", 1, 12.0)
    try:
        do_up(str(spec), yes=True, rt=runtime(), timeout=900)
    finally:
        down(name)


# -- the report ------------------------------------------------------------------------

def notes(scale: float) -> list[str]:
    notice = 120 * scale
    return [f"notice {notice:g} s (EC2's 120 s x {scale:g}); train.checkpoint_grace "
            f"{grace(notice):g} s, cut to end {MARGIN:g} s before the instance goes",
            f"not scaled: the supervisor's {POLL:g} s metadata poll (notice -> seen: 0 to "
            f"{POLL:g} s), the checkpoint grace and its {MARGIN:g} s margin (-> stopped), "
            "the nodes' bootstrap and MXNet's start on this machine's "
            f"{os.cpu_count()} cores; AWS's calls and waits are x {scale:g}",
            "phases: notice -> the master saw it -> job stopped -> replacement bootstrapped "
            "-> restarted job running -> every worker's first step after its resume; "
            "record: the recovery's seconds_to_running (from seen) and node-hours lost"]


def cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(size: dict) -> list[str]:
    head = ["recovery", "s", "/ fresh", *PHASES, "record: to running s", "node-hours lost"]
    out = [f"{size['nodes']} nodes: fresh `up` + `train` to every worker's first step "
           f"{size['fresh_s']:.2f} s (`up` {size['fresh_up_s']:.2f} s)",
           "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for r in size["recoveries"]:
        row = [r["what"], cell(r["seconds"]), cell(r["seconds"] / size["fresh_s"]),
               *map(cell, r["phases"]), cell(r["record_to_running"]),
               cell(r["node_hours_lost"], 4)]
        out.append("| " + " | ".join(row) + " |")
    return out


def sandboxed(scale: float, files: dict[str, str], measure: Callable[[Path], T]) -> T:
    """``measure(tmp)`` in a timed sandbox of its own (``aws:SCALE``) in a temp dir whose
    work/ holds ``files`` (name -> text): the job's workdir."""
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp_name:
        tmp = Path(tmp_name)
        stop = start_sandbox(tmp, scale)
        try:
            (tmp / "work").mkdir()
            for name, text in files.items():
                (tmp / "work" / name).write_text(text)
            return measure(tmp)
        finally:
            stop()


def options(doc: str, scale: float, *, warm_up: bool = True) -> argparse.Namespace | None:
    """The recovery benches' options (``--sizes``, ``--scale``, ``--json``, and with
    ``warm_up`` ``--no-warm-up``); None, said, without root (the sandbox's sshd per
    node): nothing to measure."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sizes", default="2,4")
    parser.add_argument("--scale", type=float, default=scale,
                        help="AWS's times x SCALE (sandbox --timings aws:SCALE)")
    parser.add_argument("--json", action="store_true", help="machine output")
    if warm_up:
        parser.add_argument("--no-warm-up", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print(f"{parser.prog} needs root (the sandbox's sshd per node): nothing measured")
        return None
    logging.disable(logging.WARNING)
    return args


def main() -> int:
    args = options(__doc__ or "", 0.1)
    if args is None:
        return 0

    def measure(tmp: Path) -> list[dict]:
        if not args.no_warm_up:
            warm_up(tmp)
        return [one_size(tmp, int(n), args.scale) for n in args.sizes.split(",")]

    sizes = sandboxed(args.scale, {"resumable.py": Path(resumable.__file__).read_text()},
                      measure)
    if args.json:
        print(json.dumps({"scale": args.scale, "cores": os.cpu_count(), "sizes": sizes,
                          "phases": PHASES, "notes": notes(args.scale)}, indent=1))
        return 0
    print(f"recovery vs fresh at aws:{args.scale:g}")
    for size in sizes:
        print("\n" + "\n".join(table(size)))
    print("\n" + "\n".join(f"- {line}" for line in notes(args.scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
