"""The whole clusterkit pipeline on the embedded sandbox, as a user runs it, then a summary.

    .venv/bin/python scripts/pipeline.py [--keep-work]     (scripts/demo.sh runs this)

sandbox start -> pack a generated image set -> snapshot-dataset -> up (3 CPU nodes,
examples/sandbox-cpu.yaml) -> the master reaches every worker by name -> deploy-dataset
-> train examples/mxnet_dist_sync.py (MXNet dist_sync, reading the records on every
node) -> down -> sandbox stop; then a table: time per stage, what was created and
deleted, the training result and whether it is correct. Exit 0 only when every stage
did its job and nothing is left: no resource tagged with the cluster, no sandbox
process, no loop device, no mount.

Every stage is the `clusterkit` command a user types (its output shown live, each line
indented). The spec is the example's, with two sandbox-only changes written to a copy:
a unique name, and the nodes' python3 given this checkout's MXNet (``PYTHONPATH``; the
sandbox nodes see this machine's files but build no environment of their own).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("clusterkit"))
EXAMPLE = ROOT / "examples" / "sandbox-cpu.yaml"
REGION = "us-east-1"
CLASSES, PER_CLASS = 3, 12  # 36 generated JPEGs
WORKERS = 3  # one per node (examples/sandbox-cpu.yaml: workers_per_node 1)
OK_LINE = re.compile(r"dist_sync rank (\d+)/(\d+) .*read (\d+) record\(s\) .* OK$")


@dataclass
class Stage:
    name: str
    seconds: float = 0.0
    ok: bool = False
    detail: str = ""


@dataclass
class Summary:
    stages: list[Stage] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    training: str = "not run"
    correct: bool = False

    @property
    def ok(self) -> bool:
        return (bool(self.stages) and all(s.ok for s in self.stages) and self.correct
                and not self.leftovers)


class Failed(Exception):
    """A stage did not do its job (the pipeline stops, cleans up and reports)."""


def clusterkit(*args: str, env: dict[str, str], echo: Callable[[str], None]) -> str:
    """Run one clusterkit command, its output shown live (indented) and returned."""
    echo(f"$ clusterkit {' '.join(args)}")
    proc = subprocess.Popen([CLI, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        echo("    " + line.rstrip("\n"))
    if proc.wait() != 0:
        raise Failed(f"`clusterkit {args[0]}` exited {proc.returncode}")
    return "".join(lines)


def make_images(root: Path) -> int:
    """CLASSES folders of small generated JPEGs (distinct pixels each); how many."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(7)
    for c in range(CLASSES):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(PER_CLASS):
            img = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
            ok, buf = cv2.imencode(".jpg", img)
            assert ok
            (root / f"class{c}" / f"{i:03d}.jpg").write_bytes(buf.tobytes())
    return CLASSES * PER_CLASS


def write_spec(work: Path, name: str) -> Path:
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["name"] = name
    env = spec["train"].setdefault("env", {})
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # this checkout's mxnet
    path = work / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def clusterkit_json(*args: str, env: dict[str, str],
                    echo: Callable[[str], None]) -> dict:
    """A clusterkit command run with --json: its progress shown, its JSON returned."""
    echo(f"$ clusterkit {' '.join(args)} --json")
    proc = subprocess.run([CLI, *args, "--json"], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    for line in proc.stderr.splitlines():
        echo("    " + line)
    if proc.returncode != 0:
        raise Failed(f"`clusterkit {args[0]}` exited {proc.returncode}: {proc.stdout[-300:]}")
    return json.loads(proc.stdout)


def prefixed(output: str) -> str:
    """The command's own output in `clusterkit exec`'s ``[node] line`` lines."""
    return " ".join(line.split("] ", 1)[1] for line in output.splitlines()
                    if line.strip().startswith("[") and "] " in line)


class Pipeline:
    """The stages, in order; each returns a line saying what it achieved or raises."""

    def __init__(self, work: Path, echo: Callable[[str], None]) -> None:
        self.work, self.echo = work, echo
        self.name = f"demo-{uuid.uuid4().hex[:4]}"
        self.env = dict(os.environ, CLUSTERKIT_SANDBOX="1")
        self.summary = Summary()
        self.records = 0
        self.snapshot = ""
        self.spec = Path()
        self.sandbox_dir = ""
        self.aws: dict[str, str] = {}  # the sandbox endpoint and its credentials' files
        self.up = False

    def ck(self, *args: str) -> str:
        return clusterkit(*args, env=self.env, echo=self.echo)

    def sandbox_start(self) -> str:
        from clusterkit.sandboxmode import DIR_ENV, sandbox_env

        self.ck("sandbox", "start")
        values = sandbox_env()
        self.sandbox_dir, self.aws = values[DIR_ENV], values
        return f"endpoint {values['AWS_ENDPOINT_URL']}"

    def pack(self) -> str:
        count = make_images(self.work / "images")
        prefix, images = str(self.work / "data" / "train"), str(self.work / "images")
        (self.work / "data").mkdir()
        self.ck("pack", "--list", "--recursive", prefix, images)
        self.ck("pack", "--num-thread", "2", prefix, images)
        self.records = len((self.work / "data" / "train.idx").read_text().splitlines())
        if self.records != count:
            raise Failed(f"packed {self.records} records of {count} images")
        return f"{count} generated JPEGs -> data/train.rec ({self.records} records)"

    def snapshot_dataset(self) -> str:
        out = clusterkit_json("snapshot-dataset", str(self.work / "data"), "--name",
                              self.name, "--region", REGION, env=self.env, echo=self.echo)
        self.snapshot = out["snapshot_id"]
        self.summary.created.append(f"snapshot {self.snapshot} (dataset {self.name}, "
                                    f"{out['size_gib']} GiB; kept by down, like any "
                                    f"published dataset)")
        return f"{self.snapshot}, manifest sha256:{out['manifest_sha256'][:12]}"

    def cluster_up(self) -> str:
        self.spec = write_spec(self.work, self.name)
        self.up = True
        self.ck("up", str(self.spec), "--yes")
        status = clusterkit_json("status", self.name, env=self.env, echo=self.echo)
        ids = [n["instance_id"] for n in status["nodes"]]
        self.summary.created.append(f"{len(ids)} instances {', '.join(ids)}; stack "
                                    f"clusterkit-{self.name}; key pair; security group")
        return f"{len(ids)} nodes bootstrapped"

    def names(self) -> str:
        # -A: exec forwards the agent only when asked (the master SSHes onward by name)
        answers = [prefixed(self.ck("exec", self.name, "-A", "--node", "master", "--", "ssh",
                                    f"deeplearning-worker{i}", "hostname"))
                   for i in range(1, WORKERS)]
        if len(set(answers)) != WORKERS - 1:
            raise Failed(f"workers answered {answers}")
        return "master -> deeplearning-worker1, -worker2 by name, host keys checked"

    def deploy(self) -> str:
        out = self.ck("deploy-dataset", str(self.spec), "--snapshot", self.snapshot, "--yes")
        verified = [line for line in out.splitlines() if "verified" in line]
        if len(verified) != WORKERS:
            raise Failed(f"{len(verified)} of {WORKERS} nodes verified the dataset")
        self.summary.created.append(f"{WORKERS} dataset volumes cloned from {self.snapshot}")
        return f"every node verified its copy against the manifest ({WORKERS} nodes)"

    def train(self) -> str:
        out = self.ck("train", str(self.spec), "--workdir", str(ROOT / "examples"), "--",
                      "python3", "mxnet_dist_sync.py", "--rec", "/data/train.rec",
                      "--steps", "5")
        found = [m for line in out.splitlines() if (m := OK_LINE.search(line.strip()))]
        ranks = sorted(int(m.group(1)) for m in found)
        read = sum(int(m.group(3)) for m in found)
        self.summary.training = (f"{len(found)} of {WORKERS} workers ended with the expected "
                                 f"parameters; {read} of {self.records} records read")
        self.summary.correct = ranks == list(range(WORKERS)) and read == self.records
        if not self.summary.correct:
            raise Failed(self.summary.training)
        return self.summary.training

    def down(self) -> str:
        self.ck("down", self.name, "--yes")
        self.up = False
        self.summary.deleted.append(f"cluster {self.name}: instances, dataset volumes, "
                                    "stack, security group, key pair")
        left = tagged_leftovers(self.name, self.aws)
        self.summary.leftovers += [f"{kind}: {', '.join(ids)}" for kind, ids in left.items()
                                   if ids]
        return "nothing tagged with the cluster is left" if not self.summary.leftovers \
            else "LEFT: " + "; ".join(self.summary.leftovers)

    def sandbox_stop(self) -> str:
        self.ck("sandbox", "stop")
        self.summary.deleted.append(f"the sandbox (snapshot {self.snapshot or '-'} with it)")
        left = local_leftovers(self.sandbox_dir) if self.sandbox_dir else []
        self.summary.leftovers += left
        return "no sandbox process, loop device or mount left" if not left \
            else "LEFT: " + "; ".join(left)


def tagged_leftovers(cluster: str, aws: dict[str, str]) -> dict[str, list[str]]:
    """Resources still tagged with (or named after) the cluster, asked of the sandbox
    endpoint (``aws``: its URL and the files of its credentials, as sandbox mode gives)."""
    import boto3
    import botocore.session

    core = botocore.session.Session()
    core.set_config_variable("credentials_file", aws["AWS_SHARED_CREDENTIALS_FILE"])
    core.set_config_variable("config_file", aws["AWS_CONFIG_FILE"])
    session = boto3.Session(botocore_session=core, region_name=REGION)
    ec2 = session.client("ec2", endpoint_url=aws["AWS_ENDPOINT_URL"])
    tag = [{"Name": "tag:clusterkit:cluster", "Values": [cluster]}]
    live = [{"Name": "instance-state-name",
             "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
    stacks = session.client("cloudformation", endpoint_url=aws["AWS_ENDPOINT_URL"]
                            ).describe_stacks()["Stacks"]
    return {
        "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=tag + live)[
            "Reservations"] for i in r["Instances"]],
        "volumes": [v["VolumeId"] for v in ec2.describe_volumes(Filters=tag)["Volumes"]],
        "security groups": [g["GroupId"] for g in
                            ec2.describe_security_groups(Filters=tag)["SecurityGroups"]],
        "key pairs": [k["KeyName"] for k in ec2.describe_key_pairs(Filters=tag)["KeyPairs"]],
        "stacks": [s["StackName"] for s in stacks if s["StackName"] == f"clusterkit-{cluster}"
                   and s["StackStatus"] != "DELETE_COMPLETE"],
    }


def local_leftovers(sandbox_dir: str) -> list[str]:
    """Sandbox processes, loop devices and mounts still tied to ``sandbox_dir``."""
    from clusterkit_sandbox.control import mounts_under, pids_mentioning
    from clusterkit_sandbox.disks import loops_under

    where = Path(sandbox_dir)
    found = [f"process {pid}" for pid in pids_mentioning(str(where))]
    found += [f"loop device {dev}" for dev in loops_under(where)]
    found += [f"mount {point}" for point in mounts_under(where)]
    return found


STAGES = (("sandbox start", "sandbox_start"), ("pack", "pack"),
          ("snapshot-dataset", "snapshot_dataset"), ("up", "cluster_up"),
          ("nodes by name", "names"), ("deploy-dataset", "deploy"), ("train", "train"),
          ("down", "down"), ("sandbox stop", "sandbox_stop"))
CLEANUP = ("down", "sandbox stop")  # run even after a failed stage


def run_pipeline(work: Path, echo: Callable[[str], None] = print) -> Summary:
    """Every stage in order; after a failure only the clean-up stages still run."""
    line = Pipeline(work, echo)
    failed = False
    for title, method in STAGES:
        if failed and (title not in CLEANUP or (title == "down" and not line.up)):
            continue
        echo(f"\n== {title}")
        stage = Stage(title)
        start = time.monotonic()
        try:
            stage.detail, stage.ok = getattr(line, method)(), True
        except Exception as exc:  # a stage failed: say so, clean up, report
            stage.detail, failed = f"FAILED: {exc}", True
        stage.seconds = time.monotonic() - start
        stage.ok = stage.ok and not stage.detail.startswith("LEFT")
        line.summary.stages.append(stage)
    return line.summary


def render(summary: Summary) -> str:
    width = max(len(s.name) for s in summary.stages)
    rows = [f"{'stage':<{width}}  {'time':>7}  result"]
    rows += [f"{s.name:<{width}}  {s.seconds:>6.1f}s  {'ok  ' if s.ok else 'FAIL'} {s.detail}"
             for s in summary.stages]
    rows.append(f"{'total':<{width}}  {sum(s.seconds for s in summary.stages):>6.1f}s")
    rows += ["", "created:"] + [f"  {c}" for c in summary.created]
    rows += ["deleted:"] + [f"  {d}" for d in summary.deleted]
    rows += ["left behind: " + ("; ".join(summary.leftovers) or "nothing")]
    rows += [f"training: {summary.training} -> "
             f"{'correct' if summary.correct else 'NOT correct'}"]
    rows += ["", "pipeline: " + ("OK" if summary.ok else "FAILED")]
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the working directory (images, records, spec)")
    parser.add_argument("--images", metavar="DIR", type=Path,
                        help="only write the generated image set into DIR (a new directory)")
    args = parser.parse_args()
    if args.images:
        print(f"{make_images(args.images)} JPEGs in {CLASSES} classes under {args.images}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="clusterkit-demo-"))
    try:
        summary = run_pipeline(work)
    finally:
        if not args.keep_work:
            subprocess.run(["rm", "-rf", "--", str(work)], check=False)
    print("\n" + render(summary))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
