"""Peak memory of `clusterkit pack` as the dataset grows: evidence that it stays bounded.

    .venv/bin/python bench/bench_pack_memory.py [--sizes 2000,8000] [--num-thread 2]

Generates a handful of photo-like 640x550 JPEGs (bench_pack's generator) and, for each
size N, a `.lst` of N lines cycling over them (the pipeline holds no per-image state, so
repeating files measures the same thing as N distinct files without N files on disk).
Packs each with `--resize 480 --quality 90` in a fresh process and prints that process's
peak RSS (``wait4`` rusage; this script imports nothing heavy, so the number is the
child's own), the `.rec` size and images/s. Bounded memory shows as a peak
RSS that does not grow with N while the output does. Not a timed assert: it prints numbers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTINCT = 20


def peak_rss(cmd: list[str], cwd: str) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return usage.ru_maxrss / 1024, wall  # Linux reports KiB


def write_lst(path: str, files: list[str], n: int) -> None:
    with open(path, "w") as fh:
        fh.writelines(f"{i}\t{i % 10:f}\t{files[i % len(files)]}\n" for i in range(n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,8000")
    ap.add_argument("--num-thread", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-pack-mem-")
    try:
        root = os.path.join(work, "images")
        # in a child: Linux's ru_maxrss of a child starts at this process's RSS when it
        # forks, so this one must not grow by importing OpenCV and numpy
        subprocess.run([sys.executable, "-c", "import sys; from bench.bench_pack import "
                        f"generate; generate(sys.argv[1], {DISTINCT})", root], cwd=REPO,
                       check=True)
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        base, _ = peak_rss([sys.executable, "-c", "import clusterkit.cli.main, "
                            "clusterkit.dataset.packer"], work)
        print(f"peak RSS of the interpreter with pack's imports only: {base:.0f} MiB; "
              f"--resize 480 --quality 90 --num-thread {args.num_thread}")
        for n in (int(s) for s in args.sizes.split(",")):
            out = os.path.join(work, f"n{n}")
            os.makedirs(out)
            write_lst(os.path.join(out, "data.lst"), files, n)
            rss, wall = peak_rss([sys.executable, "-m", "clusterkit", "pack", "--resize", "480",
                                  "--quality", "90", "--num-thread", str(args.num_thread),
                                  "data", root], out)
            size = os.path.getsize(os.path.join(out, "data.rec")) / (1 << 20)
            print(f"{n:7d} images: peak RSS {rss:6.0f} MiB, .rec {size:6.0f} MiB, "
                  f"{n / wall:5.0f} images/s end to end")
            shutil.rmtree(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
