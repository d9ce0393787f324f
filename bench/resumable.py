"""A resumable MXNet dist_sync job that keeps clusterkit's checkpoint contract, for the
recovery bench (bench/bench_recovery.py) and its e2e tests (tests/e2e/
test_train_recovery.py): copied into the job's workdir and run on every worker as

    python3 resumable.py STEPS PAUSE [RUN]

Rank r pushes r + 1 each step (SGD on the summed pushes, LR a power of two: float32 sums
stay exact); rank 0 saves the weights atomically after every step to
``$CLUSTERKIT_CHECKPOINT_DIR/RUN``; every rank resumes from the newest checkpoint there and
says so (``resumed from step N restart R``). The checkpoint signal is noted at the next
step (``checkpoint signal: saved at step N``: it saves every step anyway). While a file
``hold`` lies in that directory the job waits after each step (a test or the bench sets
something up). The end: ``RESULT [w0, w1, w2, w3]`` (JSON) on every worker."""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import time

INIT, LR = 1.0, 0.125


def want(steps: int, workers: int) -> float:
    """Every weight after ``steps`` steps of ``workers`` workers (uninterrupted or not)."""
    return INIT - LR * steps * workers * (workers + 1) / 2


def newest(where: str) -> dict:
    saved = sorted(glob.glob(os.path.join(where, "ckpt-*.json")))  # whole: os.replace
    return json.load(open(saved[-1])) if saved else {"step": 0, "w": [INIT] * 4}


def save(where: str, step: int, weights: list) -> None:
    tmp = os.path.join(where, f".tmp-{step}")
    with open(tmp, "w") as handle:
        json.dump({"step": step, "w": weights}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, os.path.join(where, f"ckpt-{step:06d}.json"))


def main(argv: list) -> None:
    import mxnet as mx

    steps, pause = int(argv[0]), float(argv[1])
    where = os.path.join(os.environ["CLUSTERKIT_CHECKPOINT_DIR"], *argv[2:3])
    asked = []
    signal.signal(getattr(signal, os.environ["CLUSTERKIT_CHECKPOINT_SIGNAL"]),
                  lambda *_: asked.append(1))
    os.makedirs(where, exist_ok=True)
    state = newest(where)
    kv = mx.kv.create("dist_sync")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=LR, rescale_grad=1.0, wd=0.0))
    w = mx.nd.array(state["w"])
    kv.init(0, w)
    print("resumed from step", state["step"], "restart",
          os.environ["CLUSTERKIT_RESTART_COUNT"], flush=True)
    for step in range(state["step"] + 1, steps + 1):
        kv.push(0, mx.nd.full((4,), float(kv.rank + 1)))
        kv.pull(0, out=w)
        w.wait_to_read()
        if kv.rank == 0:
            save(where, step, w.asnumpy().tolist())
        print("step", step, flush=True)
        if asked:
            print("checkpoint signal: saved at step", step, flush=True)
            asked.clear()
        time.sleep(pause)
        while os.path.exists(os.path.join(where, "hold")):
            time.sleep(0.05)
    mx.nd.waitall()
    kv._barrier()
    kv.pull(0, out=w)
    print("RESULT", json.dumps([float(v) for v in w.asnumpy()]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
