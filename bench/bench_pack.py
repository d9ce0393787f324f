"""Side-by-side throughput: MXNet's im2rec.py vs `clusterkit pack` on the same images.

    .venv/bin/python bench/bench_pack.py [--images 2000] [--num-thread 2] [--repeat 3]

Generates N photo-like JPEGs (~640x550, smooth shapes + gradients + fine noise, ~55 KB),
makes one `.lst`, then packs it with both tools with the same flags (--resize 480
--quality 90 --num-thread N), interleaved, best of --repeat runs each (this machine is
shared, so the best run is the least disturbed one). Prints images/s for each, end to end
and with each tool's start-up time (imports; measured separately) taken out, the ratio,
the pure-codec ceiling (decode + resize + encode in a tight loop on one core, times the
cores used) and how close pack gets to it. Also checks that both .rec/.idx are identical.
Needs the `mxnet` extra (im2rec.py ships in the mxnet wheel).
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

FLAGS = ["--resize", "480", "--quality", "90"]
H, W = 550, 640


def generate(root: str, n: int, classes: int = 10, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    waves = [40 * np.sin(xx * fx + yy * fy)[..., None]
             for fx, fy in rng.uniform(0.01, 0.08, (8, 2))]
    noise = cv2.GaussianBlur(rng.normal(0, 6, (2 * H, 2 * W, 3)).astype(np.float32), (3, 3), 0)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c:03d}"), exist_ok=True)
    for i in range(n):
        small = rng.integers(0, 255, (6, 7, 3), dtype=np.uint8)
        img = cv2.resize(small, (W, H), interpolation=cv2.INTER_CUBIC).astype(np.float32)
        img += waves[i % len(waves)]
        for _ in range(8):
            color = tuple(int(v) for v in rng.integers(0, 255, 3))
            center = tuple(int(v) for v in rng.integers(0, W, 2))
            cv2.circle(img, center, int(rng.integers(10, 120)), color, -1)
        y, x = rng.integers(0, H), rng.integers(0, W)
        img += noise[y:y + H, x:x + W]
        path = os.path.join(root, f"class{i % classes:03d}", f"img{i:06d}.jpg")
        cv2.imwrite(path, np.clip(img, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])


def im2rec_path() -> str:
    spec = importlib.util.find_spec("mxnet")
    if spec is None or not spec.origin:
        sys.exit("bench_pack needs the mxnet extra (im2rec.py ships in the mxnet wheel)")
    return os.path.join(os.path.dirname(spec.origin), "tools", "im2rec.py")


CPU: dict[str, float] = {}


def timed(cmd: list[str], cwd: str, name: str = "") -> float:
    """Wall seconds of one run; the least CPU seconds (user+sys, all processes) go to CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if name:
        CPU[name] = min(CPU.get(name, cpu), cpu)
    return wall


def startup(code: str) -> float:
    """Best of 3: the time a tool spends before its first image (interpreter + imports)."""
    return min(timed([sys.executable, "-c", code], ".") for _ in range(3))


def codec_ceiling(files: list[str]) -> float:
    """images/s of decode + resize + encode in one tight loop on one core (same flags)."""
    from clusterkit.dataset.codec import CodecOptions, encode_image
    from clusterkit.dataset.packer import tune_malloc

    tune_malloc()
    cv2.setNumThreads(1)
    opts = CodecOptions(resize=480, quality=90)
    datas = []
    for path in files:
        with open(path, "rb") as fh:
            datas.append(fh.read())
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for data in datas:
            encode_image(data, opts)
        best = max(best, len(datas) / (time.perf_counter() - start))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--num-thread", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", help="keep images here (reused if already generated)")
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench-pack-")
    root = os.path.join(work, "images")
    try:
        run(args, work, root)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: str, root: str) -> None:
    from clusterkit.dataset.listing import ListOptions, make_lists

    n = args.images
    if not os.path.isdir(root) or sum(len(f) for _, _, f in os.walk(root)) != n:
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        generate(root, n)
        print(f"generated {n} JPEGs {W}x{H} in {time.perf_counter() - t:.1f}s")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    print(f"images: {n}, {size / n / 1024:.0f} KB each on average; flags: "
          f"{' '.join(FLAGS)} --num-thread {args.num_thread}; cores here: {os.cpu_count()}")
    lists, _ = make_lists(os.path.join(work, "ref"), root, ListOptions(recursive=True))
    shutil.copy(lists[0], os.path.join(work, "ck.lst"))
    threads = ["--num-thread", str(args.num_thread)]
    tools = {
        "im2rec.py": [sys.executable, im2rec_path(), *FLAGS, *threads, "ref", root],
        "clusterkit pack": [sys.executable, "-m", "clusterkit", "pack", *FLAGS, *threads,
                            "ck", root],
    }
    best = {name: float("inf") for name in tools}
    for _ in range(args.repeat):
        for name, cmd in tools.items():
            best[name] = min(best[name], timed(cmd, work, name))
    boot = {"im2rec.py": startup("import mxnet, cv2, argparse, multiprocessing"),
            "clusterkit pack": startup("import clusterkit.cli.main, clusterkit.dataset.packer")}
    same = all(filecmp.cmp(os.path.join(work, "ref" + ext), os.path.join(work, "ck" + ext),
                           shallow=False) for ext in (".rec", ".idx"))
    report(n, best, boot, same, args, root)


def report(n: int, best: dict, boot: dict, same: bool, args: argparse.Namespace,
           root: str) -> None:
    rate = {k: n / v for k, v in best.items()}
    steady = {k: n / max(1e-9, best[k] - boot[k]) for k in best}
    for name in best:
        print(f"{name:16s} best {best[name]:6.2f}s  {rate[name]:7.0f} images/s end to end, "
              f"{steady[name]:7.0f} images/s without start-up ({boot[name]:.2f}s)")
    ratio_e2e = rate["clusterkit pack"] / rate["im2rec.py"]
    ratio = steady["clusterkit pack"] / steady["im2rec.py"]
    print(f"ratio pack/im2rec: {ratio:.2f}x without start-up, {ratio_e2e:.2f}x end to end "
          f"(goal >= 1.25x)")
    cpu = {k: 1000 * CPU[k] / n for k in CPU}
    print(f"CPU per 1000 images: im2rec.py {cpu['im2rec.py']:.2f}s, clusterkit pack "
          f"{cpu['clusterkit pack']:.2f}s ({cpu['im2rec.py'] / cpu['clusterkit pack']:.2f}x less); "
          f"with other jobs on the machine, wall time also depends on their load")
    print(f"outputs byte-identical: {'yes' if same else 'NO'}")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)[:300]
    per_core = codec_ceiling(files)
    cores = min(args.num_thread, os.cpu_count() or 1)
    ceiling = per_core * cores
    print(f"codec ceiling: {per_core:.0f} images/s/core x {cores} cores = {ceiling:.0f} images/s; "
          f"pack reaches {100 * steady['clusterkit pack'] / ceiling:.0f}% of it "
          f"(im2rec.py {100 * steady['im2rec.py'] / ceiling:.0f}%)")


if __name__ == "__main__":
    main()
