"""`clusterkit deploy-dataset` at scale (the deploy half of the dataset bench): wall time
of the first deploy on 1, 4 and 16 sandbox nodes as a ratio to one node (goal: 16 nodes
at most 1.5x one), its mutating AWS calls, and a second deploy (must make none).

    sudo .venv/bin/python bench/bench_dataset_deploy.py            # sizes 1,4,16
    sudo .venv/bin/python bench/bench_dataset_deploy.py --sizes 1,4 --mb 50
    sudo .venv/bin/python bench/bench_dataset.py    # the upload section, then this one

Needs root (the sandbox's sshd per node and loop-backed volumes). The snapshot is
published once with snapshot-dataset's own code (random bytes, --mb MB); each size is
`up` (not timed), deploy-dataset (timed), deploy-dataset again, `down`. CPU: what the
emulated nodes, the sandbox and the client spent during the first deploy, and the floor
that emulation puts under the wall on this machine (bench/nodecpu.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import nodecpu  # noqa: E402
from bench.bench_up import Phases, _mutating, _start  # noqa: E402
from bench.sandbox_spec import spec_text  # noqa: E402
from clusterkit.cluster.dataset.deploy import do_deploy_dataset  # noqa: E402
from clusterkit.cluster.dataset.publish import publish_directory  # noqa: E402
from clusterkit.cluster.provision.down import do_down  # noqa: E402
from clusterkit.cluster.provision.up import do_up  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402

GOAL_RATIO = 1.5


def _runtime(counter: Counter[str], phases: Phases | None = None) -> Runtime:
    session = boto3.Session(region_name="us-east-1")
    session.events.register("before-call", lambda model, **_: counter.update([model.name]))
    return Runtime(session=session, poll=0.2, report=phases or (lambda _: None))


def publish(tmp: Path, megabytes: int) -> str:
    root = tmp / "dataset"
    root.mkdir()
    for i in range(4):
        (root / f"part-{i}.rec").write_bytes(os.urandom(megabytes * 1024 * 1024 // 4))
    return publish_directory(_runtime(Counter()), "us-east-1", root, "bench").snapshot_id


def bench(count: int, tmp: Path, snapshot: str) -> dict[str, object]:
    spec = tmp / f"dd-{count}.yaml"
    spec.write_text(spec_text("dd", count, placement_group=False)
                    + "storage: {dataset: {mount: /data}}\n")
    do_up(str(spec), yes=True, rt=_runtime(Counter()), timeout=600)
    try:
        first: Counter[str] = Counter()
        before = nodecpu.sample(settle=1.0)
        phases = Phases()
        result = do_deploy_dataset(str(spec), snapshot=snapshot, rt=_runtime(first, phases),
                                   timeout=600)
        wall = time.perf_counter() - phases.t0
        time.sleep(0.3)  # the nodes' sessions end and are reaped
        cpu = nodecpu.split(before, nodecpu.sample())
        second: Counter[str] = Counter()
        start = time.perf_counter()
        do_deploy_dataset(str(spec), snapshot=snapshot, rt=_runtime(second), timeout=600)
        wall2 = time.perf_counter() - start
    finally:
        do_down(str(spec), yes=True, rt=_runtime(Counter()))
    return {"nodes": count, "wall": wall, "mutating": _mutating(first), "wall2": wall2,
            "describe": first["DescribeVolumes"],
            "bootstrap_at": phases.started.get("bootstrap"),
            "mutating2": sum(_mutating(second).values()), "cpu": cpu,
            "line": result.nodes[0].line if result.nodes else ""}


def report(rows: list[dict]) -> list[str]:
    base = rows[0]["wall"]
    out = ["deploy: deploy-dataset in the sandbox (moto + sshd per node, loop-backed volumes)",
           f"{'nodes':>5} {'wall s':>7} {'ratio':>6} {'volumes s':>9} {'mutating':>8} "
           f"{'describe':>8} {'2nd s':>6} {'2nd mutating':>12}  mutating calls of the first "
           "deploy"]
    for r in rows:
        muts = ", ".join(f"{k} {v}" for k, v in sorted(r["mutating"].items()))
        at = r["bootstrap_at"]
        out.append(f"{r['nodes']:>5} {r['wall']:>7.2f} {r['wall'] / base:>6.2f} "
                   f"{at if at is None else f'{at:.2f}':>9} "
                   f"{sum(r['mutating'].values()):>8} {r['describe']:>8} {r['wall2']:>6.2f} "
                   f"{r['mutating2']:>12}  {muts}")
    out.append("volumes s: seconds until every clone was attached (the bootstrap then "
               "mounts and verifies); describe: DescribeVolumes calls of the first deploy")
    out.append(f"node 0 said: {rows[-1]['line']}")
    out += nodecpu.table([(r["nodes"], r["cpu"], r["wall"]) for r in rows], "first deploy")
    big = rows[-1]
    ratio = big["wall"] / base
    out.append(f"{big['nodes']} nodes / {rows[0]['nodes']} node(s): {ratio:.2f}x "
               f"(goal at most {GOAL_RATIO:g}x: {'met' if ratio <= GOAL_RATIO else 'NOT met'})")
    return out + nodecpu.out_of_reach(big["nodes"], big["cpu"], base, GOAL_RATIO,
                                      "deploy-dataset")


def deploy_section(tmp: Path, args: argparse.Namespace) -> list[str]:
    """bench_dataset.py's deploy section (needs the sandbox's SSH nodes: root, no --moto)."""
    if getattr(args, "moto", False) or os.geteuid() != 0:
        return ["deploy: skipped (needs root and the sandbox's SSH nodes, not --moto)"]
    snapshot = publish(tmp, min(args.mb, 50))
    sizes = [int(n) for n in getattr(args, "sizes", "1,4,16").split(",")]
    return report([bench(n, tmp, snapshot) for n in sizes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--mb", type=int, default=20, help="dataset size in MB")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: the sandbox's nodes and loop-backed volumes")
    with tempfile.TemporaryDirectory(prefix="bench-dd-") as tmp_name:
        tmp = Path(tmp_name)
        stop, _ = _start(False, tmp)
        try:
            lines = deploy_section(tmp, args)
        finally:
            stop()  # type: ignore[operator]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
