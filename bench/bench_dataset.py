"""Datasets in the sandbox. Section 1 (upload): `snapshot-dataset` MB/s against a plain
sequential upload of the same image (one thread, every block, no zero skipping) in the
same run, against the sandbox's moto endpoint. The ratio is printed.

    .venv/bin/python bench/bench_dataset.py                  # 200 MB tree, 16 threads
    .venv/bin/python bench/bench_dataset.py --mb 500 --threads 8

Sections are functions returning rows; a later section (deploy wall time on 1/4/16
nodes) is added to SECTIONS.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataset_deploy import deploy_section  # noqa: E402
from bench.bench_up import _start  # noqa: E402
from clusterkit.aws import ebs_direct  # noqa: E402
from clusterkit.cluster.dataset.publish import publish_directory  # noqa: E402
from clusterkit.cluster.runtime import Runtime  # noqa: E402
from clusterkit.dataset import ext4image  # noqa: E402

REGION = "us-east-1"


def _tree(root: Path, megabytes: int) -> Path:
    """A packed-dataset-like tree: a few large .rec files and their small .idx."""
    chunk = os.urandom(1 << 20)
    for part in range(4):
        with open(root / f"train-{part}.rec", "wb") as handle:
            for _ in range(megabytes // 4):
                handle.write(chunk)
        (root / f"train-{part}.idx").write_text("".join(f"{i}\t{i * 4096}\n"
                                                        for i in range(1000)))
    return root


def _sequential(session: boto3.Session, image: Path) -> tuple[float, int]:
    """The plain baseline: StartSnapshot, every block in order on one thread, Complete."""
    size = image.stat().st_size // (1 << 30)
    snap = ebs_direct.start_snapshot(session, REGION, size, {}, "bench baseline", "bench-seq")
    t0 = time.perf_counter()
    stats = ebs_direct.upload_image(session, REGION, snap, str(image), threads=1,
                                    skip_zero=False)
    ebs_direct.complete_snapshot(session, REGION, snap, stats.blocks_put)
    seconds = time.perf_counter() - t0
    boto3.client("ec2", REGION).delete_snapshot(SnapshotId=snap)
    return seconds, stats.bytes_put


def upload_section(tmp: Path, args: argparse.Namespace) -> list[str]:
    (tmp / "data").mkdir()
    data = _tree(tmp / "data", args.mb)
    session = boto3.Session(region_name=REGION)
    rt = Runtime(session=session, poll=0.1)
    t0 = time.perf_counter()
    result = publish_directory(rt, REGION, data, "bench", threads=args.threads,
                               tmp_dir=str(tmp))
    wall = time.perf_counter() - t0
    image = ext4image.build(data, tmp / "baseline.img")
    seq_s, seq_bytes = _sequential(session, image.path)
    boto3.client("ec2", REGION).delete_snapshot(SnapshotId=result.snapshot_id)
    # both rates: the dataset's bytes over the upload's wall time (what a user waits for)
    fast = result.data_bytes / 1e6 / result.upload_seconds
    slow = result.data_bytes / 1e6 / seq_s
    return [
        f"upload: {result.data_bytes / 1e6:,.0f} MB dataset, {result.size_gib} GiB image",
        f"  snapshot-dataset  {result.upload_seconds:7.2f} s  {fast:8.1f} MB/s  "
        f"({result.blocks_put} blocks put, {result.blocks_skipped} zero skipped, "
        f"{args.threads} threads; whole command {wall:.2f} s)",
        f"  sequential        {seq_s:7.2f} s  {slow:8.1f} MB/s  "
        f"({seq_bytes // ebs_direct.BLOCK_SIZE} blocks put, 1 thread)",
        f"  ratio {fast / slow:.1f}x",
    ]


SECTIONS: list[tuple[str, Callable[[Path, argparse.Namespace], list[str]]]] = [
    ("upload", upload_section),
    ("deploy", deploy_section),  # bench_dataset_deploy.py: 1/4/16 nodes (root, sandbox)
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="dataset size in MB")
    parser.add_argument("--threads", type=int, default=ebs_direct.UPLOAD_THREADS)
    parser.add_argument("--moto", action="store_true", help="plain moto server")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmpdir:
        stop, _ssh = _start(args.moto, Path(tmpdir))
        try:
            for _name, section in SECTIONS:
                where = Path(tempfile.mkdtemp(dir=tmpdir))
                print("\n".join(section(where, args)), flush=True)
        finally:
            stop()


if __name__ == "__main__":
    main()
