"""A 2-node MXNet job end to end in the sandbox (the 3-node ones are in test_train.py):
its own 2-node cluster, examples/mxnet_dist_sync.py run by `clusterkit train` for several
rounds of SGD on the summed pushes. Nothing is mocked; see test_train.py for how the
sandbox nodes run MXNet."""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import support
from tests.e2e.clusters import running, user_session
from tests.e2e.test_train import Cluster, all_gone, ddp_ranks, new_cluster

EXAMPLE = Path(__file__).parents[2] / "examples" / "mxnet_dist_sync.py"
STEPS, LR, INIT = 5, 0.1, 1.0


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("train2")
    cl = new_cluster(where, support.unique_name("t2"), count=2)
    shutil.copy(EXAMPLE, cl.work / EXAMPLE.name)
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def test_two_node_dist_sync_aggregates_every_round_on_every_worker(cluster: Cluster):
    out = io.StringIO()
    command = (f"python3 {EXAMPLE.name} --steps {STEPS} --lr {LR} --init {INIT} --out out "
               "&& cat out/worker-*.json && echo")
    outcome = cluster.train(command, out=out)
    text = out.getvalue()
    assert outcome.state == "succeeded", text
    results = {node: json.loads(doc) for node, doc in
               re.findall(r"^\[(\S+)/worker-0\] (\{.*\})$", text, re.M)}
    assert sorted(results) == ["master", "worker-1"], text
    assert sorted(r["rank"] for r in results.values()) == [0, 1]
    # SGD on the sum of both workers' pushes (rank + 1) in each of STEPS rounds, worked
    # out here rather than trusted to the script: a lost or doubled push shows.
    want = INIT - LR * STEPS * (1 + 2)
    for r in results.values():
        assert (r["num_workers"], r["steps"], r["ok"]) == (2, STEPS, True), text
        assert r["params"] == pytest.approx([want] * 4, abs=1e-5), text
    assert results["master"]["params"] == results["worker-1"]["params"]
    all_gone(outcome.job_id)  # scheduler and servers stopped too
    assert cluster.active() == []


@pytest.mark.torch  # torch on the nodes: scripts/install.sh's interpreter
def test_the_torchrun_ddp_example_trains_one_model_on_two_nodes(cluster: Cluster):
    said = ddp_ranks(cluster, 2)
    assert sorted(said) == ["master", "worker-1"], said
    ranks = sorted(re.match(r"ddp rank (\d+)/2 gloo on cpu: .* OK$", line).group(1)
                   for line in said.values())
    assert ranks == ["0", "1"], said


def test_an_interruption_notice_checkpoints_every_worker_and_interrupts_the_job(
        sandbox, cluster: Cluster):
    """`clusterkit sandbox interrupt` posts a notice in worker-1's instance metadata, as
    EC2 does: its supervisor sees it, the master interrupts the job, and every worker
    gets the checkpoint signal (here it saves nothing and ends); `train` reports the
    job interrupted, naming node 1. The notice is taken back before its time, so the
    instance stays for the other tests of this cluster."""
    import threading

    from clusterkit_sandbox import imds

    out = io.StringIO()  # train's output, read while train runs in another thread
    command = ("trap 'echo checkpoint; exit 0' USR1; echo ready; "
               "while :; do sleep 0.1; done")
    done: list = []
    thread = threading.Thread(target=lambda: done.append(cluster.train(command, out=out)))
    thread.start()
    support.wait_for(lambda: out.getvalue().count("] ready") >= 2, "both workers ready", 120)
    posted = imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-1", notice=600)
    try:
        thread.join(120)
    finally:
        imds.forget(sandbox.dir, posted["instance_id"])
    [outcome] = done
    text = out.getvalue()
    assert outcome.state == "interrupted", text
    assert "node 1: spot interruption notice (terminate at" in (outcome.reason or ""), outcome
    assert re.search(r"^\[master/worker-0\] checkpoint$", text, re.M), text
    assert re.search(r"^\[worker-1/worker-0\] checkpoint$", text, re.M), text
    all_gone(outcome.job_id)
