"""A small PyTorch DistributedDataParallel job for torchrun: gloo on CPU, NCCL on GPU.

Every process trains the same tiny linear model on its own fixed data (seeded by its
rank) for ``--steps`` steps; DDP averages the gradients, so every process must end with
identical parameters: the script gathers them from every rank and compares (exit 1
when they differ), and checks an all_reduce of (rank + 1) against W(W+1)/2.
``--bench-mb N`` also times all_reduce of an N MiB float32 tensor (bus bandwidth, as
nccl-tests reports it). Each process writes ``rank-<rank>.json`` to ``--out DIR`` (or
$EXAMPLE_OUT_DIR) and prints one line ``ddp rank R/W ... OK``.

With clusterkit (torchrun gets --nnodes/--node-rank/--nproc-per-node and c10d
rendezvous on the master):
    clusterkit train examples/torchrun-g5.yaml -- python3 examples/torchrun_ddp.py
By hand on one machine, 2 processes on CPU:
    torchrun --standalone --nproc-per-node 2 examples/torchrun_ddp.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    p.add_argument("--bench-mb", type=float, default=0.0,
                   help="also time all_reduce of a tensor this many MiB")
    p.add_argument("--out", default=os.environ.get("EXAMPLE_OUT_DIR"),
                   help="directory for rank-<rank>.json")
    return p.parse_args(argv)


def setup(torch, dist, backend: str):
    """The process group and this process's device: NCCL and cuda:LOCAL_RANK when a GPU
    is there (and not --backend gloo), else gloo on the CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend)
    return backend, device


def train(torch, dist, args: argparse.Namespace, device) -> tuple[list[float], float]:
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts it)
    model = torch.nn.Linear(args.features, 1).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    x = torch.randn(args.batch, args.features, generator=gen).to(device)
    y = (x.sum(dim=1, keepdim=True) * 0.5 + 1.0).to(device)
    loss = torch.tensor(0.0)
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    return [float(v) for v in flat.cpu()], loss.detach().item()


def bench(torch, dist, device, mib: float) -> dict:
    """all_reduce of ``mib`` MiB: seconds per call and bus bandwidth 2(W-1)/W * size/t."""
    n = max(1, int(mib * 2**20 / 4))
    t = torch.ones(n, dtype=torch.float32, device=device)
    for _ in range(3):
        dist.all_reduce(t)
    if device.type == "cuda":
        torch.cuda.synchronize()
    iters, start = 10, time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    world = dist.get_world_size()
    busbw = 2 * (world - 1) / world * n * 4 / seconds / 1e9
    return {"mib": mib, "seconds": seconds, "busbw_gbps": round(busbw, 3)}


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    args = parse_args(argv)
    backend, device = setup(torch, dist, args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    params, loss = train(torch, dist, args, device)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, params)
    total = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(total)
    ok = all(p == params for p in everyone) and int(total.item()) == world * (world + 1) // 2
    result = {"rank": rank, "world_size": world, "backend": backend, "device": str(device),
              "node_rank": os.environ.get("CLUSTERKIT_NODE_RANK"), "params": params,
              "loss": loss, "all_reduce_sum": total.item(), "ok": ok,
              "bench": bench(torch, dist, device, args.bench_mb) if args.bench_mb else None}
    dist.barrier()
    dist.destroy_process_group()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"rank-{rank}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)
    speed = f", all_reduce {result['bench']['busbw_gbps']} GB/s" if result["bench"] else ""
    print(f"ddp rank {rank}/{world} {backend} on {device}: loss {loss:.5f}{speed} "
          f"{'OK' if ok else 'MISMATCH'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
