"""Chaos in the sandbox that is no evidence of a lost node (issue 42): a 2-node MXNet job
(``bench/resumable.py``: a real parameter server on CPU, a checkpoint to EFS every step)
followed by `train` with a recovery allowed meets a fault a healthy cluster shows too, and
ends with an uninterrupted run's result, no recovery fired and every node on its own
instance. The recovery module's cases of the same kind (the metadata endpoint failing, a
partition shorter than node_timeout) run on its own cluster; this module's cluster lets
these run beside them.

Real: the nodes' sshd (restarted by the sandbox as sshd restarts itself), the client's
SSH connections (failed by the sandbox's cut in the client's own connection layer).
"""

from __future__ import annotations

import io
import sysconfig
import threading
from collections.abc import Iterator

import pytest

from bench import resumable
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit_sandbox.sshdrestart import do_restart_sshd
from tests import support
from tests.e2e.clusters import (
    RESUMABLE_SECTIONS,
    check_untouched,
    lose_a_node,
    resumable_cluster,
    whole,
)
from tests.e2e.test_train import Cluster
from tests.integration.conftest import runtime

STEPS, PAUSE = 24, 0.4
SECTIONS = RESUMABLE_SECTIONS  # node_timeout: its default (60 s), longer than the cut
UNTOUCHED = {n: [resumable.want(STEPS, 2)] * 4 for n in ("master", "worker-1")}
SSHD_DOWN = 5.0  # seconds worker-1's sshd refuses connections
CLIENT_CUT = 30.0  # seconds every SSH connection of the client fails (issue 42)


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    with resumable_cluster(sandbox, tmp_path_factory.mktemp("chaos"),
                           support.unique_name("ch"), count=2, make=Cluster,
                           sections=SECTIONS.format(site=sysconfig.get_paths()["purelib"],
                                                    steps=STEPS, pause=PAUSE)) as cl:
        yield cl


def test_sshd_restarted_on_a_worker_mid_job_is_no_evidence(sandbox, cluster: Cluster):
    """issue 42, chaos: worker-1's sshd restarts at step 3 and refuses connections for
    5 s (the sessions it started, the job's and `train`'s followers, go on): the job
    ends as an uninterrupted run, nothing recovers."""
    before = whole(cluster)
    restarted: list[dict] = []
    outcome, text = lose_a_node(cluster, lambda: restarted.append(do_restart_sshd(
        str(sandbox.dir), cluster.name, "worker-1", down=SSHD_DOWN)))
    check_untouched(cluster, before, outcome, text, UNTOUCHED)
    [fault] = restarted
    assert fault["down_s"] >= SSHD_DOWN, fault


def test_the_clients_connections_cut_for_30_s_train_follows_the_job_again(
        sandbox, cluster: Cluster):
    """issue 42, chaos: at step 3 every SSH connection of the client (`train`'s follow,
    any new one) fails for 30 s, as when the client's own network drops; the job waits
    at its next step meanwhile (its hold file), so it still runs when the network is
    back. `train` follows it again (the client not reaching the master is no evidence:
    nothing is replaced), prints the rest and ends with the job's result; nothing
    recovers."""
    from clusterkit.cluster.jobs.train import do_train
    from clusterkit_sandbox.clientcut import do_cut_client

    before = whole(cluster)
    events: list = []
    rt = runtime()
    rt.report = events.append
    out = io.StringIO()
    done: list[JobOutcome] = []
    thread = threading.Thread(target=lambda: done.append(do_train(
        str(cluster.spec), workdir_option=str(cluster.work), out=out, max_recoveries=1,
        rt=rt)))
    thread.start()
    support.wait_for(lambda: "] step 3" in out.getvalue(), "the job at step 3", 180)
    do_exec(cluster.name, ["touch /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    do_cut_client(str(sandbox.dir), seconds=CLIENT_CUT)
    try:
        support.hold_fault(CLIENT_CUT, "the client's connections cut")
    finally:
        do_cut_client(str(sandbox.dir), seconds=0)
    do_exec(cluster.name, ["rm -f /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    thread.join(600)
    [outcome] = done
    text = out.getvalue()
    said = [e.text for e in events]
    assert any("the master did not answer; following job" in s for s in said), said
    assert not any("still does not answer" in s for s in said), said
    check_untouched(cluster, before, outcome, text, UNTOUCHED)
