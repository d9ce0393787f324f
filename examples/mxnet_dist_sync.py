"""A small MXNet `dist_sync` job whose result proves the gradients were aggregated.

Every worker pushes the gradient (rank + 1) for one parameter array, ``--steps`` times;
the servers apply plain SGD (learning rate ``--lr``) to the sum of all workers' pushes,
so after the job every worker must pull the same array, equal to

    init - lr * steps * (1 + 2 + ... + num_workers)

which the script computes independently and compares (exit 1 when it differs). Each
worker writes its result as JSON to ``--out DIR`` (or $EXAMPLE_OUT_DIR) as
``worker-<rank>.json`` and prints one line ``dist_sync rank R/N: ... OK``.

Runs on CPU (the sandbox) or on the GPUs clusterkit gives the worker
($CLUSTERKIT_GPUS, e.g. "0,1,2,3": the arrays live on the first). With ``--rec PATH``
each worker also reads its shard (record i where i % N == rank) of an MXNet RecordIO
file (clusterkit pack / im2rec.py output) and reports how many records and bytes it
read, to show the dataset on the node being read.

Started by `clusterkit train` (scheduler, servers and workers get the DMLC_* variables):
    clusterkit train examples/sandbox-cpu.yaml -- python3 examples/mxnet_dist_sync.py
By hand on one machine: see tests/integration/test_example_mxnet_dist_sync.py.
``--fail-rank R`` makes worker R exit ``--fail-code`` after ``--fail-after`` seconds
(a failing worker, for fail-fast tests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


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
    p.add_argument("--fail-rank", type=int, default=None)
    p.add_argument("--fail-code", type=int, default=3)
    p.add_argument("--fail-after", type=float, default=2.0)
    return p.parse_args(argv)


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


def expected_params(args: argparse.Namespace, workers: int) -> list[float]:
    """What plain SGD on the summed pushes gives: every worker's rank + 1, every step."""
    total = sum(rank + 1 for rank in range(workers))
    return [args.init - args.lr * args.steps * total] * args.size


def train(args: argparse.Namespace) -> dict:
    import mxnet as mx

    kv = mx.kv.create(args.kvstore)
    rank, workers = kv.rank, kv.num_workers
    ctx = context(mx)
    shard = read_shard(mx, args.rec, rank, workers) if args.rec else None
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=args.lr, rescale_grad=1.0, wd=0.0))
    weight = mx.nd.full((args.size,), args.init, ctx=ctx)
    kv.init(0, weight)
    started = time.monotonic()
    for _ in range(args.steps):
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
        if args.fail_rank == rank:
            time.sleep(0.2)
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
            "node_rank": os.environ.get("CLUSTERKIT_NODE_RANK"), "dataset": shard}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = train(args)
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
