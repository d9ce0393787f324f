"""`train --down` / `--down-always` end to end in the sandbox, through the CLI as a user
runs it (no terminal: `--yes`): a 2-node cluster, the docs' example job
(examples/mxnet_dist_sync.py, real MXNet), and `down` itself taking the cluster down
once the job's report is out. `--down` leaves a failed job's cluster up; `--down-always`
takes it down; a success under `--down` takes it down. Refused before anything runs:
`--down --detach`, and `--down` with no terminal and no `--yes`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from tests import support
from tests.e2e.clusters import user_session
from tests.e2e.test_train import Cluster, new_cluster
from tests.integration.conftest import leftovers, runtime

EXAMPLE = Path(__file__).parents[2] / "examples" / "mxnet_dist_sync.py"
FAILING = ("python3 mxnet_dist_sync.py --steps 100 --step-seconds 0.05 --fail-rank 1 "
           "--fail-after 1")


@pytest.fixture
def cluster(sandbox, tmp_path: Path) -> Iterator[Cluster]:
    """A 2-node cluster's spec and workdir (the example in it), the user pointed at the
    sandbox; brought up by the test; whatever is left of it is taken down after."""
    support.require_root("the sandbox's SSH nodes")
    cl = new_cluster(tmp_path, support.unique_name("td"), count=2)
    shutil.copy(EXAMPLE, cl.work / EXAMPLE.name)
    with user_session(sandbox, tmp_path):
        try:
            yield cl
        finally:
            if leftovers(cl.name):
                do_down(cl.name, yes=True, rt=runtime())
            assert leftovers(cl.name) == {}


def up(cl: Cluster) -> None:
    do_up(str(cl.spec), yes=True, rt=runtime(), timeout=180)
    assert leftovers(cl.name), "up made nothing"


def train(cl: Cluster, *args: str):
    return cl.cli("train", str(cl.spec), "--workdir", str(cl.work), *args, timeout=300)


def test_down_needs_an_end_to_follow_and_someone_to_ask(cluster: Cluster):
    """Exit 2 before any AWS call or job: with --detach; without --yes and a terminal."""
    for flags, said in ((["--down", "--detach", "--yes"], "nothing follows a detached job"),
                        (["--down-always", "--detach", "--yes"], "nothing follows"),
                        (["--down"], "no terminal to ask on then: nothing started"),
                        (["--down", "--nccl-test", "--yes"], "--down")):
        run = train(cluster, *flags, "--", "python3", "mxnet_dist_sync.py")
        assert run.returncode == 2, (flags, run.stderr)
        assert said in run.stderr and "Traceback" not in run.stderr, (flags, run.stderr)
    assert leftovers(cluster.name) == {}  # nothing was made: no cluster was ever up


def test_down_after_a_failure_only_with_down_always_and_after_a_success(cluster: Cluster):
    up(cluster)
    failed = train(cluster, "--down", "--yes", "--", FAILING)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "failing on purpose" in failed.stdout and "failed" in failed.stderr
    assert f"cluster {cluster.name} is left up to look at" in failed.stderr, failed.stderr
    assert leftovers(cluster.name), "--down took the cluster of a failed job down"

    failed = train(cluster, "--down-always", "--yes", "--", FAILING)
    assert failed.returncode == 1, failed.stderr[-3000:]  # the job's failure, still
    err = failed.stderr
    assert "(--down-always): taking cluster" in err and f"cluster {cluster.name} is gone" in err
    assert leftovers(cluster.name) == {}

    up(cluster)
    done = train(cluster, "--down", "--yes", "--", "python3", "mxnet_dist_sync.py",
                 "--steps", "10")
    err = done.stderr
    assert done.returncode == 0, err[-3000:]
    assert "dist_sync rank 0/2" in done.stdout and "OK" in done.stdout
    report = err.index(f"on cluster {cluster.name}: succeeded")  # the job's report
    taking = err.index(f"succeeded: taking cluster {cluster.name} down (--down)")
    assert report < taking < err.index(f"cluster {cluster.name} is gone"), err
    assert leftovers(cluster.name) == {}
