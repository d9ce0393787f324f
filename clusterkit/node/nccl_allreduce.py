"""An all-reduce bandwidth test, run by torchrun on every node (`clusterkit train NAME
--nccl-test` ships it in the job's directory; by hand: ``torchrun --nnodes N
--nproc-per-node G ... nccl_allreduce.py``). It prints rank 0's results in the table
format of NVIDIA's nccl-tests ``all_reduce_perf`` (``training/allreduce.py`` reads both).

float32 sum all-reduces of 8 B up to ``--max-bytes`` (doubling); per size, the average
time of ``--iters`` calls after ``--warmup`` (the mean over the ranks, as nccl-tests
takes it), algorithm bandwidth = bytes / time, bus bandwidth = algbw * 2(n-1)/n (n ranks:
what each link carries in a ring, comparable across job sizes), and #wrong: elements not
equal to the expected sum in a separate checked call. torch.distributed has no
out-of-place all_reduce: the out-of-place columns time a copy into the output buffer and
an all_reduce there (the copy is device-local, small against the network on GPUs).

Backend nccl when CUDA is available (one GPU per process: LOCAL_RANK), else gloo (CPU:
the sandbox). NVIDIA's own ``all_reduce_perf`` needs MPI to span nodes, which
clusterkit's launcher does not use; this test runs through the same launcher as the job.
Stdlib and torch only (imported in ``main``, so the table helpers import without torch).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any

FLOAT_BYTES = 4  # float32, as all_reduce_perf's default -d float
MIN_BYTES = 8  # all_reduce_perf's usual -b 8
# Bus bandwidth plateaus from ~128 MiB (allreduce.MIN_MEASURED_BYTES); 256 MiB gives two
# sizes there and keeps the whole test under a minute on GPUs.
GPU_MAX_BYTES = 256 << 20
# gloo over TCP on CPUs (the sandbox): a few MiB keep the run to seconds.
CPU_MAX_BYTES = 4 << 20
GPU_WARMUP, GPU_ITERS = 5, 20  # all_reduce_perf's defaults (-w 5 -n 20)
CPU_WARMUP, CPU_ITERS = 1, 5
GB = 1e9  # nccl-tests' GB/s are 10^9 bytes per second


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """``min_bytes`` doubling up to ``max_bytes`` (each a whole number of floats)."""
    found, size = [], max(min_bytes, FLOAT_BYTES)
    while size <= max_bytes:
        found.append(size - size % FLOAT_BYTES)
        size *= 2
    return found


def bus_factor(ranks: int) -> float:
    """all_reduce's bus bandwidth / algorithm bandwidth: 2(n-1)/n (0 for one rank)."""
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


def time_text(us: float) -> str:
    """nccl-tests' time column: 2 decimals, fewer as the number grows (7 wide)."""
    if us < 1e4:
        return f"{us:7.2f}"
    return f"{us:7.1f}" if us < 1e5 else f"{us:7.0f}"


def row(size: int, ranks: int, timings: list[tuple[float, int]]) -> str:
    """One table row: size, count, type, redop, root, then (time, algbw, busbw, #wrong)
    out-of-place and in-place; ``timings``: (seconds per call, wrong elements) each."""
    text = f"{size:12d}  {size // FLOAT_BYTES:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
    for seconds, wrong in timings:
        algbw = size / seconds / GB if seconds > 0 else 0.0
        text += (f"  {time_text(seconds * 1e6)}  {algbw:6.2f}  "
                 f"{algbw * bus_factor(ranks):6.2f}  {wrong:6d}")
    return text


def header(min_bytes: int, max_bytes: int, warmup: int, iters: int, backend: str,
           ranks: list[tuple[int, str, int, str, str]]) -> list[str]:
    """nccl-tests' header: settings, one line per rank (pid, host, device, bus, name),
    the column titles."""
    lines = [f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: "
             f"2(factor) warmup iters: {warmup} iters: {iters} agg iters: 1 validation: 1 "
             "graph: 0",
             f"# clusterkit nccl_allreduce.py: torch.distributed all_reduce, {backend}",
             "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10} device {dev:2d} "
              f"[{bus}] {name}" for r, (pid, host, dev, bus, name) in enumerate(ranks)]
    pad = " " * 38
    lines += ["#", f"#{pad}out-of-place                       in-place",
              "#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)"]
    return lines


def footer(busbw: list[float], wrong: int) -> list[str]:
    """Out-of-bounds count and the average bus bandwidth over every row and mode."""
    average = sum(busbw) / len(busbw) if busbw else 0.0
    return [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
            f"# Avg bus bandwidth    : {average:g} ", "#"]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-bytes", type=int, default=0,
                   help=f"largest message (default {GPU_MAX_BYTES >> 20} MiB on GPUs, "
                        f"{CPU_MAX_BYTES >> 20} MiB on CPUs)")
    p.add_argument("--min-bytes", type=int, default=MIN_BYTES)
    p.add_argument("--iters", type=int, default=0, help="timed calls per size")
    p.add_argument("--warmup", type=int, default=-1, help="untimed calls per size first")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="default: nccl with CUDA, else gloo")
    return p.parse_args(argv)


def _device(torch: Any, backend: str) -> Any:  # torch: imported in main
    if backend != "nccl":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def _describe(torch: Any, device: Any) -> tuple[int, str, int, str, str]:
    """(pid, host, device index, bus id, name) of this rank."""
    if device.type != "cuda":
        return os.getpid(), socket.gethostname(), 0, "cpu", "CPU"
    props = torch.cuda.get_device_properties(device)
    bus = f"0x{getattr(props, 'pci_bus_id', 0):x}"
    return os.getpid(), socket.gethostname(), device.index, bus, props.name


class Bench:
    """The timed and checked all-reduces of one rank."""

    def __init__(self, torch: Any, dist: Any, device: Any, warmup: int, iters: int) -> None:
        self.torch, self.dist, self.device = torch, dist, device
        self.warmup, self.iters = warmup, iters
        self.ranks, self.rank = dist.get_world_size(), dist.get_rank()

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def timed(self, call: Any) -> float:
        """Seconds per call, averaged over the ranks."""
        for _ in range(self.warmup):
            call()
        self.sync()
        self.dist.barrier()
        start = time.perf_counter()
        for _ in range(self.iters):
            call()
        self.sync()
        mine = self.torch.tensor([(time.perf_counter() - start) / self.iters],
                                 dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(mine)
        return float(mine.item()) / self.ranks

    def wrong(self, source: Any, call: Any, result: Any) -> int:
        """Elements of ``result`` not equal to the ranks' sum after one ``call`` with
        every element of ``source`` set to rank + 1 (counted over every rank)."""
        source.fill_(float(self.rank + 1))
        call()
        expected = self.ranks * (self.ranks + 1) / 2.0
        bad = (result != expected).sum().to(self.torch.int64).reshape(1)
        self.dist.all_reduce(bad)
        return int(bad.item())

    def size(self, size: int) -> list[tuple[float, int]]:
        """(seconds, wrong) out-of-place, then in-place, for ``size`` bytes."""
        count = size // FLOAT_BYTES
        send = self.torch.zeros(count, dtype=self.torch.float32, device=self.device)
        recv = self.torch.zeros_like(send)

        def out_of_place() -> None:
            recv.copy_(send)
            self.dist.all_reduce(recv)

        def in_place() -> None:
            self.dist.all_reduce(send)

        return [(self.timed(out_of_place), self.wrong(send, out_of_place, recv)),
                (self.timed(in_place), self.wrong(send, in_place, send))]


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    args = _arguments(argv)
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    gpu = backend == "nccl"
    max_bytes = args.max_bytes or (GPU_MAX_BYTES if gpu else CPU_MAX_BYTES)
    warmup = args.warmup if args.warmup >= 0 else (GPU_WARMUP if gpu else CPU_WARMUP)
    iters = args.iters or (GPU_ITERS if gpu else CPU_ITERS)
    device = _device(torch, backend)
    dist.init_process_group(backend)
    try:
        return _run(torch, dist, device, args.min_bytes, max_bytes, warmup, iters, backend)
    finally:
        dist.destroy_process_group()


def _run(torch: Any, dist: Any, device: Any, min_bytes: int, max_bytes: int, warmup: int,
         iters: int, backend: str) -> int:
    bench = Bench(torch, dist, device, warmup, iters)
    ranks: list[Any] = [None] * bench.ranks
    dist.all_gather_object(ranks, _describe(torch, device))
    say = print if bench.rank == 0 else (lambda *_a, **_k: None)
    for line in header(min_bytes, max_bytes, warmup, iters, backend, ranks):
        say(line, flush=True)
    busbw, wrong = [], 0
    for size in sizes(min_bytes, max_bytes):
        timings = bench.size(size)
        wrong += sum(w for _, w in timings)
        busbw += [size / s / GB * bus_factor(bench.ranks) for s, _ in timings if s > 0]
        say(row(size, bench.ranks, timings), flush=True)
    for line in footer(busbw, wrong):
        say(line, flush=True)
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
