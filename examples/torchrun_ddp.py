"""A small PyTorch DistributedDataParallel job for torchrun: gloo on CPU, NCCL on GPU.

Every process trains the same tiny linear model on its own fixed data (seeded by its
rank) for ``--steps`` steps; DDP averages the gradients, so every process must end with
identical parameters: the script gathers them from every rank and compares (exit 1
when they differ), and checks an all_reduce of (rank + 1) against W(W+1)/2.
``--bench-mb N`` also times all_reduce of an N MiB float32 tensor (bus bandwidth, as
nccl-tests reports it). Each process writes ``rank-<rank>.json`` to ``--out DIR`` (or
$EXAMPLE_OUT_DIR) and prints one line ``ddp rank R/W ... OK``; rank 0 also prints
``ddp rank 0: step S/T loss L`` after each step. ``--step-seconds X`` sleeps X s after
each step (a job slow enough to interrupt).

clusterkit's checkpoint contract, with ``--checkpoint-dir DIR`` (default
$CLUSTERKIT_CHECKPOINT_DIR, the spec's ``train.checkpoint_dir``, storage every node sees;
without one nothing of this happens): rank 0 saves the model, the optimizer and the step
as ``DIR/ckpt-<step>.pt`` (atomically: temp file, fsync, rename; the newest KEEP kept)
every ``--checkpoint-every K`` steps and at the step boundary after the checkpoint signal
($CLUSTERKIT_CHECKPOINT_SIGNAL, default SIGUSR1; clusterkit sends it to the workers, not
to torchrun's agent), then trains on (SIGTERM ends it; SIGTERM or SIGINT as the checkpoint
signal itself ends it after the save). On start rank 0 picks the newest complete
checkpoint, every rank loads that one and goes on from the step after it, so a resumed
job ends with the parameters of an uninterrupted one. A fresh run wants an empty DIR.

An elastic job (``train.elastic``: torchrun ``--nnodes MIN:MAX``) may start again with
fewer nodes than it has, or with more again: the script reads WORLD_SIZE at each start
and scales its learning rate by WORLD_SIZE / the full world ($CLUSTERKIT_NUM_NODES x
LOCAL_WORLD_SIZE): each step averages fewer samples, so it moves in proportion (the
linear scaling rule); rank 0 prints ``ddp rank 0: world W of F, lr X`` at each start.

With clusterkit (torchrun gets --nnodes/--node-rank/--nproc-per-node and c10d
rendezvous on the master):
    clusterkit train examples/torchrun-g5.yaml -- python3 examples/torchrun_ddp.py
By hand on one machine, 2 processes on CPU:
    torchrun --standalone --nproc-per-node 2 examples/torchrun_ddp.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import sys
import time

KEEP = 3  # checkpoints kept in the directory; older ones are deleted after each save
CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)\.pt")  # temp files (".ckpt-…tmp-PID") never match


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
    p.add_argument("--checkpoint-dir", default=os.environ.get("CLUSTERKIT_CHECKPOINT_DIR") or None,
                   help="save to and resume from here (default $CLUSTERKIT_CHECKPOINT_DIR)")
    p.add_argument("--checkpoint-every", type=int, default=5, metavar="K",
                   help="also save every K steps (0: only on the checkpoint signal)")
    p.add_argument("--step-seconds", type=float, default=0.0, help="sleep after each step")
    return p.parse_args(argv)


class CheckpointRequest:
    """The checkpoint signal's handler only sets ``pending`` (no I/O in a handler); the
    training loop saves at the next step boundary and clears it with ``take``."""

    def __init__(self, name: str) -> None:
        self.signal = signal.Signals[name if name.startswith("SIG") else "SIG" + name]
        self.pending = False
        signal.signal(self.signal, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.pending = True

    def take(self) -> bool:
        pending, self.pending = self.pending, False
        return pending

    def end_if_stop_signal(self) -> None:
        """SIGTERM or SIGINT as the checkpoint signal also means stop: after its save."""
        if self.signal in (signal.SIGTERM, signal.SIGINT):
            sys.stdout.flush()
            os._exit(128 + self.signal)


def checkpoints(directory: str) -> list[tuple[int, str]]:
    """(step, path) of every file named as a checkpoint, newest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), os.path.join(directory, name)) for name in names
             if (m := CHECKPOINT_NAME.fullmatch(name))]
    return sorted(found, reverse=True)


def newest_complete(torch, directory: str) -> str | None:
    """The newest checkpoint that loads whole (a torn or truncated file is skipped)."""
    for step, path in checkpoints(directory):
        try:
            state = torch.load(path, map_location="cpu")
            if state["step"] == step and {"model", "optimizer"} <= state.keys():
                return path
        except Exception:  # a truncated zip, a pickle error, a missing key: not complete
            pass
        print(f"checkpoint: skipped incomplete {path}", flush=True)
    return None


def write_atomic(path: str, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: a temp file in the same directory,
    fsync, rename over, fsync the directory."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(torch, directory: str, step: int, model, opt) -> None:
    buf = io.BytesIO()
    torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, buf)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"ckpt-{step:08d}.pt")
    write_atomic(path, buf.getvalue())
    for _, old in checkpoints(directory)[KEEP:]:
        with contextlib.suppress(FileNotFoundError):  # another writer pruned it first
            os.remove(old)
    print(f"checkpoint: saved step {step} to {path}", flush=True)


def resume(torch, dist, directory: str, model, opt, device) -> int:
    """Every rank loads the checkpoint rank 0 found newest; the step it saved (0: none)."""
    chosen = [newest_complete(torch, directory) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(chosen, src=0)
    if chosen[0] is None:
        return 0
    state = torch.load(chosen[0], map_location=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    restart = os.environ.get("CLUSTERKIT_RESTART_COUNT", "0")
    print(f"checkpoint: resumed from step {state['step']} (restart {restart})", flush=True)
    return state["step"]


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


def train(torch, dist, args: argparse.Namespace, device,
          request: CheckpointRequest | None) -> tuple[list[float], float, int]:
    """Final parameters, last loss, and the step resumed from (0: a fresh start)."""
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts it)
    model = torch.nn.Linear(args.features, 1).to(device)
    world, full = dist.get_world_size(), full_world()
    lr = args.lr * world / max(full, world)  # an elastic job on fewer nodes: smaller steps
    if rank == 0:
        print(f"ddp rank 0: world {world} of {max(full, world)}, lr {lr:g}", flush=True)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    done = resume(torch, dist, args.checkpoint_dir, model, opt, device) if request else 0
    for group in opt.param_groups:  # this start's rate, not the checkpoint's
        group["lr"] = lr
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    x = torch.randn(args.batch, args.features, generator=gen).to(device)
    y = (x.sum(dim=1, keepdim=True) * 0.5 + 1.0).to(device)
    loss = torch.tensor(0.0)
    for step in range(done + 1, args.steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"ddp rank 0: step {step}/{args.steps} loss {loss.item():.5f}", flush=True)
        if request is not None:  # a step boundary
            asked = request.take()
            every = args.checkpoint_every
            if rank == 0 and (asked or (every > 0 and step % every == 0)):
                save(torch, args.checkpoint_dir, step, model, opt)
            if asked:
                request.end_if_stop_signal()
        time.sleep(args.step_seconds)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    return [float(v) for v in flat.cpu()], loss.detach().item(), done


def full_world() -> int:
    """The job's world at its full size: its nodes x processes per node (WORLD_SIZE
    outside clusterkit)."""
    nodes = os.environ.get("CLUSTERKIT_NUM_NODES")
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    if nodes and nodes.isdigit() and local.isdigit():
        return int(nodes) * int(local)
    return int(os.environ.get("WORLD_SIZE", "1"))


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
    args = parse_args(argv)
    request = None
    if args.checkpoint_dir:  # before torch loads: the signal must never find the default
        request = CheckpointRequest(os.environ.get("CLUSTERKIT_CHECKPOINT_SIGNAL") or "SIGUSR1")
    import torch
    import torch.distributed as dist

    backend, device = setup(torch, dist, args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    params, loss, resumed_from = train(torch, dist, args, device, request)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, params)
    total = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(total)
    ok = all(p == params for p in everyone) and int(total.item()) == world * (world + 1) // 2
    result = {"rank": rank, "world_size": world, "backend": backend, "device": str(device),
              "node_rank": os.environ.get("CLUSTERKIT_NODE_RANK"), "params": params,
              "loss": loss, "all_reduce_sum": total.item(), "ok": ok,
              "resumed_from": resumed_from,
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
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # not sys.exit: with the process group destroyed and every result written, a gloo
    # thread can still abort the interpreter's teardown ("terminate called without an
    # active exception", exit -6) when its peer closes first; nothing is left to run
    os._exit(code)
