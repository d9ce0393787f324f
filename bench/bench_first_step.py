"""How long until my first step: `clusterkit up --yes` of a fresh cluster to the first
training step logged by every worker, beside its limit (the critical path of AWS's
round trips and waits that the run really made, from the timed sandbox's own record)
and clusterkit's overhead above it; the same for a no-op `up`, `deploy-dataset` on the
running cluster and `down` (the command to nothing tagged left).

    sudo .venv/bin/python bench/bench_first_step.py                    # 1,4,16 nodes, scale 0.1
    sudo .venv/bin/python bench/bench_first_step.py --sizes 1,4 --scale 1 --out /tmp/charts

Needs root (the sandbox's sshd per node, loop-backed volumes): without it, it says so
and exits 0. It starts a sandbox of its own with ``--timings aws:SCALE`` in a temp dir,
publishes two small RecordIO datasets (snapshot-dataset's own code), and for each size
takes examples/sandbox-cpu.yaml with EFS (deleted by `down`) and the first dataset in
the spec, then: `up` and `train` (examples/mxnet_dist_sync.py ``--steps 1 --rec
/data/train.rec``: each worker reads its shard, makes one dist_sync step and logs
``dist_sync rank R/N ... OK``; the window ends when every worker has), a no-op `up`,
`deploy-dataset --snapshot` the second dataset (every clone replaced), `down`. Each
command runs in this process with the product's defaults (``Runtime.make``: its poll
interval too, 2 s x SCALE as ``clusterkit.timescale`` paces it, ``--poll`` to try
another); the CLI's start (~0.3 s) is not in it. ``--compare`` also runs `up` -> first
step as before the changes of issue 25 item 3 (``as_before``) at each size, in the same
run, on a cluster of its own. ``--second``: `up` -> first step of a second new cluster
in the same account while the first runs. At ``--scale 1`` the report sets each `up`
beside the figures before issue 41 (recorded: bench/first_step_goals41.py) and prints
issue 41's goals (never asserted).

The limit and overhead are defined in clusterkit/timeline/critical.py; each command's
stages (from its progress events: each stage from its first start to the next stage's)
get theirs too, so a missed goal names the stage that holds the time. Every command
writes a PNG timeline (clusterkit/cli/timeline.py) to ``--out``: a row per stage, per
node (its SSH wait, bootstrap, dataset attach, first step) and per AWS resource (its
waits), the API calls, and the critical path. CPU: what the emulated nodes, the
sandbox, the client and the emulation (every process but the client, the nodes' jobs
too) spent in each stage, and this machine's floor: each stage at least AWS's limit in
it and the emulation's CPU in it over the cores (on AWS each node brings its own CPU).
One 1-node `up` and `down` first, not measured (``--no-warm-up``): the endpoint builds
each service on its first call.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import re
import sys
import sysconfig
import tempfile
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import nodecpu  # noqa: E402
from bench.first_step_goals41 import SECOND  # noqa: E402
from bench.first_step_report import BEFORE_DEPLOY, BEFORE_UP, charts, report  # noqa: E402
from clusterkit.cli import timeline as chart  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.events import Event, Kind  # noqa: E402
from clusterkit.timeline import critical  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
REGION = "us-east-1"
OK_LINE = re.compile(r"^\[(\S+)/worker-\d+\] dist_sync rank \d+/\d+ .* OK$")
TRAIN = ("python3", "mxnet_dist_sync.py", "--steps", "1", "--rec", "/data/train.rec")
BEFORE = "(before any stage)"
JOB = "job: start to first step"


@dataclass
class Clock:
    """The reporter (each event with its wall-clock time) and train's output (each line
    with the time it arrived)."""

    events: list[tuple[float, Event]] = field(default_factory=list)
    lines: list[tuple[float, str]] = field(default_factory=list)
    samples: list[tuple[float, float]] = field(default_factory=list)  # at, emulation CPU

    def __call__(self, event: Event) -> None:
        self.events.append((self.sample(), event))

    def write(self, text: str) -> int:
        now = self.sample()
        self.lines += [(now, line) for line in text.splitlines() if line.strip()]
        return len(text)

    def sample(self) -> float:
        """Now, with the CPU seconds the emulation has spent so far kept for it."""
        now = time.time()
        self.samples.append((now, busy_seconds() - time.process_time()))
        return now

    def busy_between(self, lo: float, hi: float) -> float:
        """The emulation's CPU seconds from the last sample at or before ``lo`` to the
        last at or before ``hi``."""
        def at(t: float) -> float:
            k = bisect_right([a for a, _ in self.samples], t) - 1
            return self.samples[max(k, 0)][1]

        return at(hi) - at(lo)

    def flush(self) -> None:
        """train's output is a file to it."""


@dataclass
class Outcome:
    """What a measured command says of its window: when it ended (None: when it
    returned), more places to cut it into stages, bars and marks of its own, and the
    nodes' names by instance id."""

    end: float | None = None
    cuts: tuple[tuple[str, float], ...] = ()
    bars: list[chart.Bar] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    """One command's window, its limit, its stages' limits and its chart."""

    what: str
    nodes: int
    limit: critical.Limit
    stages: dict[str, critical.Limit]
    bars: list[chart.Bar]
    marks: list[tuple[str, float]]
    names: dict[str, str]
    cpu: nodecpu.CpuSplit | None = None
    busy: float = 0.0  # CPU seconds the emulation spent in the window: all but the client
    stage_cpu: dict[str, float] = field(default_factory=dict)  # the same, per stage


def busy_seconds() -> float:
    """CPU seconds this machine has spent, all cores and processes (/proc/stat): the
    emulated nodes' jobs run under detached supervisors that no sampled process reaps.
    Less this process's own (``time.process_time()``), it is the emulation's: nodes,
    their jobs, the sandbox (and anything else the machine ran meanwhile)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # not idle, iowait


class Bench:
    """The sandbox of this run: its timeline, the specs, the datasets."""

    def __init__(self, tmp: Path, args: argparse.Namespace) -> None:
        self.tmp, self.args = tmp, args
        from clusterkit_sandbox.state import RUN_DIR
        from clusterkit_sandbox.timed import TIMELINE_FILE

        self.timeline = tmp / "sandbox" / RUN_DIR / TIMELINE_FILE
        self.snapshots: list[str] = []
        self.packages: list[str] = []  # train.packages of the specs made now (--image)
        self.efs_id: str | None = None  # a file system of yours the specs mount (--image)
        self.last_up: Any = None  # the UpResult of the last first_step

    def runtime(self, clock: Clock | None = None) -> Runtime:
        rt = Runtime.make(region=REGION, report=clock)
        return dataclasses.replace(rt, poll=self.args.poll) if self.args.poll else rt

    def publish(self, label: str, seed: int) -> str:
        from clusterkit.cluster.dataset.publish import publish_directory

        root = self.tmp / label
        make_records(root, seed)
        return publish_directory(self.runtime(), REGION, root, label).snapshot_id

    def spec(self, count: int, prefix: str = "fs") -> tuple[Path, str]:
        data = yaml.safe_load((EXAMPLES / "sandbox-cpu.yaml").read_text())
        name = f"{prefix}{count}-{uuid.uuid4().hex[:4]}"
        data["name"] = name
        data["nodes"]["count"] = count
        efs = {"mount": "/efs", "file_system_id": self.efs_id} if self.efs_id else \
            {"mount": "/efs", "deletion_policy": "delete"}
        data["storage"] = {"dataset": {"mount": "/data", "snapshot": self.snapshots[0]},
                           "efs": efs}
        data["train"]["env"]["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
        data["train"]["packages"] = list(self.packages)
        path = self.tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path, name

    def intervals(self) -> list[critical.Interval]:
        from clusterkit_sandbox.timed import read_timeline

        return critical.intervals(read_timeline(self.timeline))


def make_records(root: Path, seed: int, count: int = 64) -> None:
    """A small RecordIO dataset (``train.rec`` + ``.idx``): ``count`` records of 4 KiB."""
    import random

    from clusterkit.dataset.recordio import IndexedRecordWriter, pack_header

    root.mkdir(parents=True)
    rng = random.Random(seed)
    writer = IndexedRecordWriter(str(root / "train.idx"), str(root / "train.rec"))
    for k in range(count):
        writer.write_idx(k, pack_header(float(k % 4), k) + rng.randbytes(4096))
    writer.commit()


# -- one command, measured -------------------------------------------------------------

def stage_windows(events: list[tuple[float, Event]], start: float, end: float,
                  extra: tuple[tuple[str, float], ...] = ()) -> dict[str, tuple[float, float]]:
    """Each stage from its first start to the next stage's (the last to ``end``), and
    the time before the first; ``extra``: more (name, start) to cut at."""
    firsts: dict[str, float] = {}
    for at, e in events:
        if e.kind == Kind.STAGE_STARTED and e.stage is not None:
            firsts.setdefault(e.stage.value, at)
    cuts = sorted([*firsts.items(), *extra], key=lambda item: item[1])
    cuts = [(BEFORE, start), *cuts] if not cuts or cuts[0][1] > start else cuts
    return {name: (at, cuts[k + 1][1] if k + 1 < len(cuts) else end)
            for k, (name, at) in enumerate(cuts)}


def node_bars(events: list[tuple[float, Event]], names: dict[str, str],
              windows: dict[str, tuple[float, float]]) -> list[chart.Bar]:
    """Per node: from its stage's start to the node's last event of that stage (SSH
    answering, its bootstrap's last step, its dataset clone attached)."""
    last: dict[tuple[str, str], float] = {}
    for at, e in events:
        if e.node and e.stage is not None and e.stage.value in windows \
                and e.kind in (Kind.PROGRESS, Kind.ERROR, Kind.WARNING):
            last[(e.node, e.stage.value)] = at
    order = {iid: k for k, iid in enumerate(names)}
    ranked = sorted(last.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[1]))
    return [chart.Bar(f"node {names.get(node, node)}", stage, windows[stage][0], at)
            for (node, stage), at in ranked]


def aws_bars(items: list[critical.Interval], limit: critical.Limit) -> list[chart.Bar]:
    inside = critical.clip(items, limit.start, limit.end)
    out = [chart.Bar(f"aws {i.resource}", i.what, i.start, i.end)
           for i in inside if i.kind is critical.Kind.WAIT]
    out += [chart.Bar("aws API calls", "API call", i.start, i.end)
            for i in inside if i.kind is critical.Kind.CALL]
    return out + [chart.Bar("critical path (limit)", "critical path", i.start, i.end)
                  for i in limit.chain]


def measure(bench: Bench, what: str, nodes: int, command: Callable[[Clock], Outcome],
            *, cpu: bool = False, names: dict[str, str] | None = None) -> Run:
    """Run ``command`` and measure its window against the sandbox's record."""
    clock = Clock()
    before = nodecpu.sample(settle=1.0) if cpu else None
    start = clock.sample()
    out = command(clock)
    end = out.end or clock.sample()
    clock.sample()
    split = nodecpu.split(before, nodecpu.sample(settle=0.3)) if before else None
    items = bench.intervals()
    limit = critical.critical_path(items, start, end)
    windows = stage_windows(clock.events, start, end, out.cuts)
    names = {**(names or {}), **out.names}
    bars = [chart.Bar(f"stage {name}", name, lo, hi) for name, (lo, hi) in windows.items()]
    bars += node_bars(clock.events, names, windows) + out.bars
    bars += aws_bars(items, limit)
    return Run(what, nodes, limit, critical.by_window(items, windows), bars, out.marks,
               names, split, clock.busy_between(start, end),
               {name: clock.busy_between(lo, hi) for name, (lo, hi) in windows.items()})


# -- the commands ----------------------------------------------------------------------

def label(index: int | None) -> str:
    """A node as train's output names it."""
    return "master" if index == 0 else f"worker-{index}"


def first_step(bench: Bench, spec: Path, count: int) -> Callable[[Clock], Outcome]:
    """`up`, then `train` until every worker logged its first step."""
    from clusterkit.cluster.jobs.train import do_train
    from clusterkit.cluster.provision.up import do_up

    def run(clock: Clock) -> Outcome:
        up = bench.last_up = do_up(str(spec), yes=True, rt=bench.runtime(clock), timeout=900)
        up_done = time.time()
        job = do_train(str(spec), command=TRAIN, workdir_option=str(EXAMPLES), out=clock,
                       rt=bench.runtime(clock))
        firsts: dict[str, float] = {}
        for at, line in clock.lines:
            if (m := OK_LINE.match(line)) is not None:
                firsts.setdefault(m.group(1), at)
        if job.state != "succeeded" or len(firsts) != count:
            tail = "\n".join(line for _, line in clock.lines[-30:])
            raise SystemExit(f"train on {count} node(s): {job.state}, {len(firsts)} worker(s) "
                             f"logged a step:\n{tail}")
        started = next(at for at, e in reversed(clock.events) if e.kind == Kind.STAGE_DONE
                       and e.stage is not None and e.stage.value == "train")
        end = max(firsts.values())
        return Outcome(end, ((JOB, started),),
                       [chart.Bar(f"node {n}", "first step", started, at)
                        for n, at in firsts.items()],
                       [("up done", up_done), ("job started", started), ("first step", end)],
                       {n.instance_id: label(n.index) for n in up.nodes})

    return run


def noop_up(bench: Bench, spec: Path) -> Callable[[Clock], Outcome]:
    from clusterkit.cluster.provision.up import do_up

    def run(clock: Clock) -> Outcome:
        do_up(str(spec), yes=True, rt=bench.runtime(clock), timeout=900)
        return Outcome()

    return run


def deploy(bench: Bench, spec: Path, count: int,
           snapshot: str | None = None) -> Callable[[Clock], Outcome]:
    """deploy-dataset of ``snapshot`` (the second one): every node's clone replaced,
    mounted, verified."""
    from clusterkit.cluster.dataset.deploy import do_deploy_dataset

    def run(clock: Clock) -> Outcome:
        result = do_deploy_dataset(str(spec), snapshot=snapshot or bench.snapshots[1], yes=True,
                                   rt=bench.runtime(clock), timeout=900)
        if len(result.nodes) != count or result.bootstrap is None or not result.bootstrap.ok:
            raise SystemExit(f"deploy-dataset on {count} node(s) did not verify every node")
        return Outcome()

    return run


def down(bench: Bench, name: str) -> Callable[[Clock], Outcome]:
    """`down`, to nothing tagged left (asked again until then, at most 120 s)."""
    from clusterkit.cluster.provision.down import do_down

    def run(clock: Clock) -> Outcome:
        do_down(name, yes=True, rt=bench.runtime(clock), timeout=900)
        end = time.time()
        deadline = end + 120
        while left := leftovers(name):
            if time.time() > deadline:
                raise SystemExit(f"down {name} left {left}")
            time.sleep(0.1)
            end = time.time()
        return Outcome(end)

    return run


def leftovers(name: str) -> list[str]:
    """What is still tagged with (or named for) the cluster."""
    import boto3

    session = boto3.Session(region_name=REGION)
    ec2, efs = session.client("ec2"), session.client("efs")
    tag = [{"Name": "tag:clusterkit:cluster", "Values": [name]}]
    live = [{"Name": "instance-state-name",
             "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
    found = [i["InstanceId"] for r in ec2.describe_instances(Filters=tag + live)
             ["Reservations"] for i in r["Instances"]]
    found += [v["VolumeId"] for v in ec2.describe_volumes(Filters=tag)["Volumes"]]
    found += [g["GroupId"] for g in ec2.describe_security_groups(Filters=tag)["SecurityGroups"]]
    found += [k["KeyName"] for k in ec2.describe_key_pairs(Filters=tag)["KeyPairs"]]
    found += [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]
              if {"Key": "clusterkit:cluster", "Value": name} in f.get("Tags", [])]
    stacks = session.client("cloudformation").describe_stacks()["Stacks"]
    return found + [s["StackName"] for s in stacks if s["StackName"] == f"clusterkit-{name}"
                    and s["StackStatus"] != "DELETE_COMPLETE"]


@contextlib.contextmanager
def as_before() -> Iterator[None]:
    """clusterkit as before issue 25 item 3's changes to its order, rebuilt here from
    today's pieces: the launch waits for the whole stack (instance profile and all);
    the EFS mount target is made only after the SSH wait and waited for at once (it was
    made after the launch's nodes ran); the bootstrap runs in rounds, every node's facts
    before any node's steps (two fan-outs); deploy-dataset attaches the clones once
    every one is available."""
    from clusterkit.cluster.dataset import deploy as dataset
    from clusterkit.cluster.provision import efsaccess, regionprep
    from clusterkit.remote import fanout

    saved = (regionprep.LAUNCH_EARLY, efsaccess.mount_target, efsaccess.mount_ready,
             fanout.chain_each, dataset._attach_when_ready)
    asked: list[tuple[Any, ...]] = []

    def made_later(*args: Any) -> None:
        asked.append(args)

    def made_now_and_ready(*args: Any) -> None:
        for made in asked:
            saved[1](*made)
        saved[2](*args)

    regionprep.LAUNCH_EARLY = False
    efsaccess.mount_target, efsaccess.mount_ready = made_later, made_now_and_ready
    fanout.chain_each, dataset._attach_when_ready = in_rounds, attach_after_all
    try:
        yield
    finally:
        (regionprep.LAUNCH_EARLY, efsaccess.mount_target, efsaccess.mount_ready,
         fanout.chain_each, dataset._attach_when_ready) = saved


def in_rounds(login: Any, targets: Any, next_command: Any, *, timeout: float | None = None,
              parallel: int = 64, pool: Any = None) -> dict[str, list[Any]]:
    """``fanout.chain_each`` as a round per command: every node's first command, all of
    them answered, then every node's second (the bootstrap's two fan-outs)."""
    from clusterkit.remote import fanout

    results: dict[str, list[Any]] = {t.hop.label: [] for t in targets}
    last: dict[str, Any] = {t.hop.label: None for t in targets}
    live = list(targets)
    while live:
        commands = {t.hop.label: c for t in live
                    if (c := next_command(t, last[t.hop.label])) is not None}
        live = [t for t in live if t.hop.label in commands]
        if not live:
            break
        group = fanout.run_each(login, live, commands, timeout=timeout, warn=True,
                                parallel=parallel, pool=pool)
        for label, res in group.items():
            results[label].append(res)
            last[label] = res
        live = [t for t in live if group[t.hop.label].error is None]
    return results


def attach_after_all(rt: Any, region: str, waiting: dict[str, Any], made: Any,
                     deadline: float) -> None:
    """deploy-dataset's attach as before: wait until every volume is available, then
    attach them all."""
    from clusterkit.aws import volumes
    from clusterkit.cluster.dataset import deploy as dataset
    from clusterkit.cluster.runtime import at_once
    from clusterkit.plan.dataset import DEVICE_HINT

    dataset._wait(rt, region, list(waiting), lambda c: c.state in ("available", "in-use"),
                  "available", deadline)

    def attach(item: tuple[str, Any]) -> None:
        volumes.attach_volume(rt.session, region, item[0], item[1].instance_id, DEVICE_HINT)
        made.attached.add(item[1].index)

    at_once(list(waiting.items()), attach)


def before(bench: Bench, count: int) -> Run:
    """`up` -> first step on a fresh cluster of ``count`` nodes, ``as_before``."""
    spec, name = bench.spec(count, prefix="fb")
    try:
        with as_before():
            return measure(bench, BEFORE_UP, count, first_step(bench, spec, count), cpu=True)
    finally:
        from clusterkit.cluster.provision.down import do_down

        do_down(name, yes=True, rt=bench.runtime(), timeout=900)


def second_cluster(bench: Bench, count: int) -> Run:
    """`up` -> first step of another new cluster in the same account while the first
    runs (--second): nothing of one cluster is another's (its own roles, profiles, file
    system), so it waits for what the first did."""
    spec, name = bench.spec(count, prefix="fs2-")
    try:
        return measure(bench, SECOND, count, first_step(bench, spec, count), cpu=True)
    finally:
        from clusterkit.cluster.provision.down import do_down

        do_down(name, yes=True, rt=bench.runtime(), timeout=900)


def one_size(bench: Bench, count: int) -> list[Run]:
    """The four commands on a fresh cluster of ``count`` nodes (``--compare``: and `up`
    as before on another)."""
    earlier = [before(bench, count)] if bench.args.compare else []
    spec, name = bench.spec(count)
    runs: list[Run] = []
    try:
        runs.append(measure(bench, "up -> first step", count, first_step(bench, spec, count),
                            cpu=True))
        names = runs[0].names
        runs.append(measure(bench, "no-op up", count, noop_up(bench, spec), names=names))
        runs.append(measure(bench, "deploy-dataset", count, deploy(bench, spec, count),
                            names=names))
        if bench.args.compare:  # the first snapshot back, every clone replaced again
            with as_before():
                runs.append(measure(bench, BEFORE_DEPLOY, count,
                                    deploy(bench, spec, count, bench.snapshots[0]),
                                    names=names))
        if bench.args.second:
            runs.append(second_cluster(bench, count))
    finally:
        runs.append(measure(bench, "down", count, down(bench, name),
                            names=runs[0].names if runs else None))
    return earlier + runs


# -- the sandbox -----------------------------------------------------------------------

def start_sandbox(tmp: Path, scale: float) -> Callable[[], object]:
    """A timed sandbox in ``tmp``, this process pointed at it; returns its stopper."""
    import subprocess

    from clusterkit import sandboxmode
    from clusterkit_sandbox.control import do_start, do_stop
    from clusterkit_sandbox.timings import parse

    os.environ.update({"HOME": str(tmp), "CLUSTERKIT_SANDBOX": "1",
                       "AWS_DEFAULT_REGION": REGION})
    os.environ.pop("SSH_AUTH_SOCK", None)  # the key in ~/.ssh logs in
    (tmp / ".ssh").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp / ".ssh" / "id_ed25519")], check=True)
    do_start(tmp / "sandbox", timings=parse(f"aws:{scale}"))
    sandboxmode.apply(os.environ, str(tmp / "sandbox"))
    return lambda: do_stop(tmp / "sandbox")


def warm_up(bench: Bench) -> None:
    """One `up` and `down` of 1 node, not measured: the endpoint builds each service
    (EC2, EFS, CloudFormation) on its first call."""
    from clusterkit.cluster.provision.down import do_down
    from clusterkit.cluster.provision.up import do_up

    spec, name = bench.spec(1, prefix="warm")
    try:
        do_up(str(spec), yes=True, rt=bench.runtime(), timeout=900)
    finally:
        do_down(name, yes=True, rt=bench.runtime(), timeout=900)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--scale", type=float, default=0.1,
                        help="AWS's times x SCALE (sandbox --timings aws:SCALE)")
    parser.add_argument("--poll", type=float, default=None,
                        help="seconds between polls (default: the product's)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/clusterkit-first-step"),
                        help="where the PNG timelines go")
    parser.add_argument("--no-warm-up", action="store_true")
    parser.add_argument("--second", action="store_true",
                        help="also `up` -> first step of a second new cluster while the "
                             "first runs, at each size")
    parser.add_argument("--compare", action="store_true",
                        help="also `up` -> first step and deploy-dataset as before the "
                             "changes of issue 25 item 3 (as_before), at each size in the "
                             "same run")
    parser.add_argument("--image", action="store_true",
                        help="also, at one node: `up` -> first step with the GPU stack's "
                             "packages (real sizes), `image build`, and `up` -> first step "
                             "on that image (bench/first_step_image.py)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_first_step needs root (the sandbox's sshd per node and loop-backed "
              "volumes): nothing measured")
        return 0
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-first-step-") as tmp_name:
        tmp = Path(tmp_name)
        stop = start_sandbox(tmp, args.scale)
        try:
            bench = Bench(tmp, args)
            bench.snapshots = [bench.publish("fsdata-a", 1), bench.publish("fsdata-b", 2)]
            if not args.no_warm_up:
                warm_up(bench)
            runs = [r for n in args.sizes.split(",") for r in one_size(bench, int(n))]
            lines: list[str] = []
            if args.image:
                from bench.first_step_image import image_runs

                more, lines = image_runs(bench, measure, first_step)
                runs += more
            poll = bench.runtime().poll
        finally:
            stop()
    print("\n".join(report(runs, args, poll) + lines))
    print("\ntimelines: " + " ".join(charts(runs, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
