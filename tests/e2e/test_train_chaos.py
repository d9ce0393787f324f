"""Chaos in the sandbox that is no evidence of a lost node (issue 42): a 2-node MXNet job
(``bench/resumable.py``: a real parameter server on CPU, a checkpoint to EFS every step)
followed by `train` with a recovery allowed meets a fault a healthy cluster shows too, and
ends with an uninterrupted run's result, no recovery fired and every node on its own
instance. The recovery module's cases of the same kind (the metadata endpoint failing, a
partition shorter than node_timeout) run on its own cluster; this module's cluster lets
these run beside them.

Real: the nodes' sshd (restarted by the sandbox as sshd restarts itself).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import resumable
from clusterkit_sandbox.sshdrestart import do_restart_sshd
from tests import support
from tests.e2e.clusters import (
    check_untouched,
    lose_a_node,
    running,
    sandbox_spec,
    user_session,
    whole,
)
from tests.e2e.test_train import Cluster

STEPS, PAUSE = 24, 0.4
SECTIONS = """\
storage:
  efs: {{mount: /efs, deletion_policy: delete}}
train:
  framework: mxnet
  python: /usr/bin/python3
  command: python3 resumable.py {steps} {pause}
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}}}
  packages: []
  checkpoint_dir: /efs/ckpt
  checkpoint_grace: 4
"""
UNTOUCHED = {n: [resumable.want(STEPS, 2)] * 4 for n in ("master", "worker-1")}
SSHD_DOWN = 5.0  # seconds worker-1's sshd refuses connections


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("chaos")
    name = support.unique_name("ch")
    spec = where / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=2, instance_type="c5.large", extra=SECTIONS.format(
        site=sysconfig.get_paths()["purelib"], steps=STEPS, pause=PAUSE)))
    work = where / "work"
    work.mkdir()
    (work / "resumable.py").write_text(Path(resumable.__file__).read_text())
    cl = Cluster(name, spec, work)
    with user_session(sandbox, where), running(cl.spec, cl.name):
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

