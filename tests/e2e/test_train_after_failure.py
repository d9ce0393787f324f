"""A failed job and what comes right after it (issue 36), end to end in the sandbox with
real MXNet (CPU) on a 3-node cluster of its own: `train` again at once waits for the
failed job's last node to stop (instead of `error: job … is running`) and succeeds;
`stop` of a job that already ended says so, and exits 0."""

from __future__ import annotations

import io

from clusterkit.cluster.jobs.train import do_train
from clusterkit.events import Event, Kind
from clusterkit_sandbox.node import SHARED_IN_NODE
from tests import support
from tests.e2e import test_train
from tests.e2e.test_train import Cluster, all_gone
from tests.integration.conftest import runtime

cluster = test_train.cluster  # its 3-node MXNet cluster: one of this module's own

# Worker 1 fails once every worker has started; worker 2 ignores SIGTERM (as a server
# busy in a barrier may), so its node stops only when the kill comes after the job's
# 10 s grace: the job has ended (failed) while that node is still stopping.
FAIL_SLOW_STOP = (
    f"m={SHARED_IN_NODE}/ck-$CLUSTERKIT_JOB_ID; "
    "touch $m-$CLUSTERKIT_NODE_RANK; "
    "if [ \"$CLUSTERKIT_NODE_RANK\" = 1 ]; then "
    "for _ in $(seq 600); do [ -e $m-0 ] && [ -e $m-2 ] && break; sleep 0.1; done; "
    "rm -f $m-0 $m-1 $m-2; sleep 3; echo about to fail; exit 3; fi; "  # (see FAIL_ON_1)
    "if [ \"$CLUSTERKIT_NODE_RANK\" = 2 ]; then trap '' TERM; fi; "
    "while :; do sleep 0.2; done")


def test_train_right_after_a_failed_job_waits_for_its_stop_and_succeeds(cluster: Cluster):
    failed = cluster.train(FAIL_SLOW_STOP, out=io.StringIO())
    assert failed.failed is not None and failed.failed.node == "worker-1", failed
    events: list[Event] = []
    rt = runtime()
    rt.report = events.append
    out = io.StringIO()
    again = do_train(str(cluster.spec), workdir_option=str(cluster.work), rt=rt, out=out)
    said = [e.text for e in events if e.kind in (Kind.STAGE_STARTED, Kind.STAGE_DONE)]
    assert again.state == "succeeded", (said, out.getvalue())
    waited = f"job {failed.job_id} ended but is still stopping on "
    assert any(t.startswith(waited) and "worker-2" in t and t.endswith(
        ": waiting for it (at most 60 s)") for t in said), said
    assert f"job {failed.job_id} has stopped on every node" in said
    all_gone(failed.job_id)
    assert cluster.active() == []


def test_stop_of_a_job_that_already_ended_says_so(cluster: Cluster):
    support.wait_for(lambda: cluster.active() == [], "no job left by another test",
                     timeout=60, interval=1)
    failed = cluster.train("if [ \"$CLUSTERKIT_NODE_RANK\" = 1 ]; then exit 3; fi; sleep 300",
                           out=io.StringIO())
    assert failed.state == "failed"
    support.wait_for(lambda: cluster.active() == [], "the failed job stopped everywhere",
                     timeout=60, interval=1)
    for _ in range(2):  # and again: the same answer
        stop = cluster.cli("stop", cluster.name)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert f"job {failed.job_id} is already stopped: it ended failed (" in stop.stderr
        assert stop.stdout == "" and "stopped on 3 node(s)" not in stop.stderr, stop.stderr
    as_json = cluster.cli("stop", cluster.name, "--job", failed.job_id, "--json")
    assert as_json.returncode == 0 and '"already_stopped": true' in as_json.stdout
