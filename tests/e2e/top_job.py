"""A real MXNet job for `top`'s e2e tests (tests/e2e/test_top.py), copied into the
job's workdir and run on every worker as ``python3 top_job.py MODE SECONDS``:
dist_async push/pull rounds of one small array, MXNet's own Speedometer printing
``Speed: N samples/sec`` every 5 batches. MODE ``burn``: node 1 spins the CPU between
batches (the others sleep), at the same pace; ``straggler``: node 2 takes 5x as long per
batch; ``steady``: every node sleeps between batches (no CPU spent on purpose).
dist_async: each worker goes at its own pace. With CLUSTERKIT_IO_ONLY=1 (`scaling
--io-only`) no kvstore: the batches' pace alone, as an input pipeline measured by itself."""

import logging
import os
import sys
import time

import mxnet as mx

BATCH, PAUSE = 32, 0.04

logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
mode, seconds = sys.argv[1], float(sys.argv[2])
node = int(os.environ["CLUSTERKIT_NODE_RANK"])
pause = PAUSE * (5 if mode == "straggler" and node == 2 else 1)
spin = mode == "burn" and node == 1
io_only = os.environ.get("CLUSTERKIT_IO_ONLY") == "1"  # `scaling --io-only`: no kvstore
if not io_only:
    kv = mx.kv.create("dist_async")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01))  # async servers need an updater
    kv.init(0, mx.nd.zeros((4,)))
out = mx.nd.zeros((4,))
speed = mx.callback.Speedometer(BATCH, frequent=5)
end, batch = time.time() + seconds, 0
while time.time() < end:
    if not io_only:
        kv.push(0, mx.nd.ones((4,)))
        kv.pull(0, out=out)
        out.wait_to_read()
    until = time.time() + pause
    while spin and time.time() < until:
        pass
    time.sleep(max(0.0, until - time.time()))
    speed(mx.model.BatchEndParam(epoch=0, nbatch=batch, eval_metric=None, locals=None))
    batch += 1
print("DONE", batch, flush=True)
