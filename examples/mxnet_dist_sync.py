"""A small MXNet `dist_sync` job whose result proves the gradients were aggregated.

Every worker pushes the gradient (rank + 1) for one parameter array, ``--steps`` times;
the servers apply plain SGD (learning rate ``--lr``) to the sum of all workers' pushes,
so after the job every worker must pull the same array, equal to

    init - lr * steps * (1 + 2 + ... + num_workers)

which the script computes independently and compares (exit 1 when it differs). Each
worker writes its result as JSON to ``--out DIR`` (or $EXAMPLE_OUT_DIR) as
``worker-<rank>.json`` and prints one line ``dist_sync rank R/N: ... OK``; worker 0 also
prints ``dist_sync rank 0: step S/T`` after each step.

Runs on CPU (the sandbox) or on the GPUs clusterkit gives the worker
($CLUSTERKIT_GPUS, e.g. "0,1,2,3": the arrays live on the first). With ``--rec PATH``
each worker also reads its shard (record i where i % N == rank) of an MXNet RecordIO
file (clusterkit pack / im2rec.py output) and reports how many records and bytes it
read, to show the dataset on the node being read.

clusterkit's checkpoint contract, with ``--checkpoint-dir DIR`` (default
$CLUSTERKIT_CHECKPOINT_DIR, the spec's ``train.checkpoint_dir``; without one nothing of
this happens): worker 0 saves the pulled parameters and the step as ``DIR/ckpt-<step>.json``
(atomically: temp file, fsync, rename; the newest KEEP kept) every ``--checkpoint-every K``
steps and at the step boundary after the checkpoint signal ($CLUSTERKIT_CHECKPOINT_SIGNAL,
default SIGUSR1), then trains on (SIGTERM ends it; SIGTERM or SIGINT as the checkpoint
signal itself ends it after the save). On start every worker offers the newest complete
checkpoint to the kvstore's init, where worker 0's offer is the one dist_sync keeps, and
pulls back the parameters and the step to go on after; SGD without momentum has no state
on the servers, so a resumed job ends exactly where an uninterrupted one would, and the
check above holds. A fresh run wants an empty DIR.

Started by `clusterkit train` (scheduler, servers and workers get the DMLC_* variables):
    clusterkit train examples/sandbox-cpu.yaml -- python3 examples/mxnet_dist_sync.py
By hand on one machine: see tests/integration/test_example_mxnet_dist_sync.py.
``--fail-rank R`` makes worker R exit ``--fail-code`` after ``--fail-after`` seconds
(a failing worker, for fail-fast tests); ``--step-seconds X`` sleeps X s after each step
(a job slow enough to interrupt).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time

KEEP = 3  # checkpoints kept in the directory; older ones are deleted after each save
CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)\.json")  # temp files (".ckpt-…tmp-PID") never match


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--size", type=int, default=4, help="elements of the parameter array")
    p.add_argument("--init", type=float, default=1.0)
    p.add_argument("--kvstore", default="dist_sync")
    p.add_argument("--out", default=os.environ.get("EXAMPLE_OUT_DIR"),
                   help="directory for worker-<rank>.json")
    p.add_argument("--rec", help="an MXNet RecordIO file to read this worker's shard of")
    p.add_argument("--checkpoint-dir", default=os.environ.get("CLUSTERKIT_CHECKPOINT_DIR") or None,
                   help="save to and resume from here (default $CLUSTERKIT_CHECKPOINT_DIR)")
    p.add_argument("--checkpoint-every", type=int, default=5, metavar="K",
                   help="also save every K steps (0: only on the checkpoint signal)")
    p.add_argument("--step-seconds", type=float, default=0.0, help="sleep after each step")
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples one step stands for, in the Speedometer's samples/sec")
    p.add_argument("--speed-every", type=int, default=5, metavar="K",
                   help="print the Speedometer's line every K steps (0: never)")
    p.add_argument("--fail-rank", type=int, default=None)
    p.add_argument("--fail-code", type=int, default=3)
    p.add_argument("--fail-after", type=float, default=2.0)
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


def load_newest(directory: str, size: int) -> dict | None:
    """The newest complete checkpoint (a torn or truncated file is skipped), or None."""
    for step, path in checkpoints(directory):
        try:
            with open(path) as f:
                ckpt = json.load(f)
            if ckpt["step"] == step and len(ckpt["params"]) == size:
                return ckpt
        except (OSError, ValueError, KeyError, TypeError):
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


def save(directory: str, step: int, params: list[float]) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"ckpt-{step:08d}.json")
    write_atomic(path, json.dumps({"step": step, "params": params}).encode())
    for _, old in checkpoints(directory)[KEEP:]:
        with contextlib.suppress(FileNotFoundError):  # another writer pruned it first
            os.remove(old)
    print(f"checkpoint: saved step {step} to {path}", flush=True)


def context(mx):
    gpus = [g for g in os.environ.get("CLUSTERKIT_GPUS", "").split(",") if g.strip()]
    return mx.gpu(int(gpus[0])) if gpus else mx.cpu()


def read_shard(mx, path: str, rank: int, workers: int) -> dict:
    """Records i % workers == rank of a RecordIO file: count, payload bytes, labels seen."""
    reader = mx.recordio.MXRecordIO(path, "r")
    count = size = index = 0
    labels: set[float] = set()
    try:
        while True:
            record = reader.read()
            if record is None:
                break
            if index % workers == rank:
                header, payload = mx.recordio.unpack(record)
                label = header.label
                labels.add(float(label if not hasattr(label, "__len__") else label[0]))
                count += 1
                size += len(payload)
            index += 1
    finally:
        reader.close()
    return {"path": path, "records": count, "bytes": size, "total_records": index,
            "labels": sorted(labels)}


def expected_params(args: argparse.Namespace, workers: int, steps: int | None = None,
                    ) -> list[float]:
    """What plain SGD on the summed pushes gives after ``steps`` (default: all of them):
    every worker's rank + 1, every step."""
    total = sum(rank + 1 for rank in range(workers))
    done = args.steps if steps is None else steps
    return [args.init - args.lr * done * total] * args.size


class Speed:
    """MXNet's own Speedometer over the steps (``--batch-size`` samples each), its
    metric the pulled parameters' mean distance from what dist_sync must give."""

    def __init__(self, mx, args: argparse.Namespace, workers: int, ctx, first: int) -> None:
        self.mx, self.args, self.workers, self.ctx = mx, args, workers, ctx
        self.first = first  # the run's first step (after a resume: not 1)
        self.metric = mx.metric.MAE(name="param-error")
        self.meter = (mx.callback.Speedometer(args.batch_size, args.speed_every)
                      if args.speed_every > 0 else None)

    def step(self, step: int, weight) -> None:
        if self.meter is None:
            return
        want = self.mx.nd.array(expected_params(self.args, self.workers, step), ctx=self.ctx)
        self.metric.update([want], [weight])
        # batches counted from this run's start: the Speedometer's K steps took that long
        self.meter(self.mx.model.BatchEndParam(epoch=0, nbatch=step - self.first + 1,
                                               eval_metric=self.metric, locals=None))


def train(args: argparse.Namespace, request: CheckpointRequest | None) -> dict:
    import mxnet as mx

    kv = mx.kv.create(args.kvstore)
    rank, workers = kv.rank, kv.num_workers
    ctx = context(mx)
    shard = read_shard(mx, args.rec, rank, workers) if args.rec else None
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=args.lr, rescale_grad=1.0, wd=0.0))
    ckpt = load_newest(args.checkpoint_dir, args.size) if args.checkpoint_dir else None
    weight = mx.nd.array(ckpt["params"] if ckpt else [args.init] * args.size, ctx=ctx)
    done = mx.nd.array([ckpt["step"] if ckpt else 0], ctx=ctx)
    # dist_sync keeps worker 0's init of each key: pull back what every worker goes on from
    kv.init([0, 1], [weight, done])
    kv.pull([0, 1], out=[weight, done])
    first = int(done.asscalar()) + 1
    if first > 1:
        restart = os.environ.get("CLUSTERKIT_RESTART_COUNT", "0")
        print(f"checkpoint: resumed from step {first - 1} (restart {restart})", flush=True)
    started = time.monotonic()
    speed = Speed(mx, args, workers, ctx, first)
    speed.step(first - 1, weight)  # batch 0: the Speedometer's clock starts here
    for step in range(first, args.steps + 1):
        if args.fail_rank == rank and time.monotonic() - started >= args.fail_after:
            print(f"dist_sync rank {rank}: failing on purpose (exit {args.fail_code})",
                  flush=True)
            os._exit(args.fail_code)
        kv.push(0, mx.nd.full((args.size,), float(rank + 1), ctx=ctx))
        # push and pull are asynchronous: a worker that ran ahead would push step k+1
        # before the servers merged step k, and dist_sync merges by count, not by step.
        # A push completes once the servers applied that step's merged gradient.
        mx.nd.waitall()
        kv.pull(0, out=weight)
        weight.wait_to_read()
        if rank == 0:
            print(f"dist_sync rank 0: step {step}/{args.steps}", flush=True)
        speed.step(step, weight)
        if request is not None:  # a step boundary: the pulled weight is this step's
            asked = request.take()
            every = args.checkpoint_every
            if rank == 0 and (asked or (every > 0 and step % every == 0)):
                save(args.checkpoint_dir, step, [float(v) for v in weight.asnumpy()])
            if asked:
                request.end_if_stop_signal()
        if args.fail_rank == rank:
            time.sleep(0.2)
        time.sleep(args.step_seconds)
    if args.fail_rank == rank:  # too few steps to reach --fail-after: fail here
        time.sleep(max(0.0, args.fail_after - (time.monotonic() - started)))
        print(f"dist_sync rank {rank}: failing on purpose (exit {args.fail_code})", flush=True)
        os._exit(args.fail_code)
    mx.nd.waitall()
    kv._barrier()  # a pull right after a push is no barrier: every push applied first
    kv.pull(0, out=weight)
    params = [round(float(v), 6) for v in weight.asnumpy()]
    want = [round(v, 6) for v in expected_params(args, workers)]
    return {"rank": rank, "num_workers": workers, "steps": args.steps, "lr": args.lr,
            "context": str(ctx), "params": params, "expected": want,
            "ok": all(abs(a - b) < 1e-4 for a, b in zip(params, want, strict=True)),
            "resumed_from": first - 1,
            "node_rank": os.environ.get("CLUSTERKIT_NODE_RANK"), "dataset": shard}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # the Speedometer logs through `logging`: its lines on stdout, as MXNet's scripts do
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    request = None
    if args.checkpoint_dir:  # before mxnet starts: the signal must never find the default
        request = CheckpointRequest(os.environ.get("CLUSTERKIT_CHECKPOINT_SIGNAL") or "SIGUSR1")
    result = train(args, request)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"worker-{result['rank']}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)
    shard = result["dataset"]
    read = f", read {shard['records']} record(s) of {shard['path']}" if shard else ""
    print(f"dist_sync rank {result['rank']}/{result['num_workers']} on {result['context']}: "
          f"params {result['params'][0]} expected {result['expected'][0]}{read} "
          f"{'OK' if result['ok'] else 'MISMATCH'}", flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
