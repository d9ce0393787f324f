"""What the e2e modules share to run a cluster of their own in the sandbox: a spec's
common header, a real ssh-agent holding a fresh key, the user's environment pointed at
the sandbox, and a cluster `up` brings up and `down` must leave nothing of.

A module fixture reads::

    with user_session(sandbox, where), running(spec, name) as up:
        yield ...

And what the recovery and chaos modules share to run a job and lose (or not) a node of
it: `train` in a thread, the cluster made whole, the job's results, "nothing recovered".

Not a test module: only helpers (the fixtures stay in the modules that use them)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import pytest

from bench import resumable
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import UpResult, do_up
from clusterkit_sandbox.node import SHARED_IN_NODE, shared_dir
from tests import support
from tests.e2e.test_up_down import SANDBOX_AMI
from tests.integration.conftest import leftovers, runtime

if TYPE_CHECKING:
    from tests.conftest import SandboxHandle

C = TypeVar("C")
HEADER = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [{instance_type}]
  market: on-demand
  image: {{id: {ami}}}
  placement_group: false
  root_volume: {{size_gb: 8, type: gp3}}
ssh:
  user: ubuntu
"""


def sandbox_spec(name: str, *, count: int, instance_type: str, extra: str = "") -> str:
    """A spec of ``count`` on-demand ``instance_type`` nodes of the sandbox's image in
    us-east-1 (no placement group, 8 GB gp3 root, user ubuntu); ``extra``: the YAML
    sections that follow ``ssh:`` (storage, train)."""
    return HEADER.format(name=name, count=count, instance_type=instance_type,
                         ami=SANDBOX_AMI) + extra


# bench/resumable.py's job: a 2-role MXNet job (a parameter server and a worker per node)
# that checkpoints every step to EFS; format it with site (the client's site-packages),
# steps and pause (seconds after each step)
RESUMABLE_SECTIONS = """\
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


@contextmanager
def resumable_cluster(sandbox: SandboxHandle, where: Path, name: str, *, count: int,
                      sections: str, make: Callable[[str, Path, Path], C]) -> Iterator[C]:
    """A running cluster ``name`` of ``count`` c5.large nodes for ``sections`` (the spec's
    storage and train), its workdir ``where``/work holding bench/resumable.py, made as
    ``make(name, spec, workdir)``, for a user of ``sandbox`` (``user_session``); `down`
    on exit (``running``)."""
    spec = where / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=count, instance_type="c5.large", extra=sections))
    work = where / "work"
    work.mkdir()
    (work / "resumable.py").write_text(Path(resumable.__file__).read_text())
    made = make(name, spec, work)
    with user_session(sandbox, where), running(spec, name):
        yield made


def start_agent(where: Path, key: Path) -> tuple[subprocess.Popen, str]:
    """A real ``ssh-agent`` listening on ``where``/agent.sock and holding ``key``: the
    process and its socket."""
    sock = str(where / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            agent.kill()
            raise TimeoutError("ssh-agent did not create its socket")
        time.sleep(0.02)
    subprocess.run(["ssh-add", "-q", str(key)], env={**os.environ, "SSH_AUTH_SOCK": sock},
                   check=True, capture_output=True)
    return agent, sock


@contextmanager
def ssh_agent(where: Path) -> Iterator[str]:
    """A fresh key (``where``/id_ed25519) in an agent of its own; yields the agent's
    socket and stops the agent on exit."""
    agent, sock = start_agent(where, support.ssh_keygen(where / "id_ed25519"))
    try:
        yield sock
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(5)


def point_at_sandbox(mp: pytest.MonkeyPatch, sandbox: SandboxHandle) -> None:
    """AWS clients (and clusterkit) in this process use ``sandbox``: its variables set,
    none left from the developer's shell that would point them elsewhere."""
    support.forget_default_session()  # boto3.client(): signed with this sandbox's key
    for var in support.FOREIGN_AWS_VARS:
        mp.delenv(var, raising=False)
    for var, value in sandbox.env.items():
        mp.setenv(var, value)


@contextmanager
def user_session(sandbox: SandboxHandle, where: Path) -> Iterator[str]:
    """A user of ``sandbox`` whose HOME is ``where`` (no ~/.ssh keys: an agent holding a
    fresh key, ``where``/id_ed25519, is the only way in) and CLUSTERKIT_HOME
    ``where``/ckhome; yields the agent's socket. The environment is put back and the
    agent stopped on exit."""
    with ssh_agent(where) as sock, pytest.MonkeyPatch.context() as mp:
        point_at_sandbox(mp, sandbox)
        mp.setenv("HOME", str(where))
        mp.setenv("CLUSTERKIT_HOME", str(where / "ckhome"))
        mp.setenv("SSH_AUTH_SOCK", sock)
        yield sock


@contextmanager
def running(spec: Path, name: str, *, timeout: float = 180) -> Iterator[UpResult]:
    """`up` of ``spec`` (cluster ``name``); on exit, after a failed `up` too, `down`,
    which must leave no resource of the cluster."""
    try:
        yield do_up(str(spec), yes=True, rt=runtime(), timeout=timeout)
    finally:
        do_down(str(spec), yes=True, rt=runtime())
        assert leftovers(name) == {}


def shared_file(sandbox_dir: Path, name: str) -> tuple[Path, str]:
    """A file of the sandbox's one shared directory (``clusterkit_sandbox.node.shared_dir``):
    its path here and its path in every node. A node sees nothing else of this machine."""
    return shared_dir(sandbox_dir / "run") / name, f"{SHARED_IN_NODE}/{name}"


class Trains(Protocol):
    """A module's cluster (``tests.e2e.test_train.Cluster``): its name, spec and `train`."""

    name: str
    spec: Path

    def train(self, *command: str, **kwargs: object) -> JobOutcome: ...


def name_of(index: int | None) -> str:
    return "master" if index == 0 else f"worker-{index}"


def whole(cluster: Trains, checkpoints: str = "/efs/ckpt") -> dict[str, str]:
    """The cluster made whole (a test before may have lost a node) with no checkpoint
    left; node name -> instance id."""
    result = do_up(str(cluster.spec), yes=True, rt=runtime())
    do_exec(cluster.name, [f"rm -rf {checkpoints}"], nodes=["master"], rt=runtime())
    return {name_of(n.index): n.instance_id for n in result.nodes}


def train_in_thread(cluster: Trains, out: io.StringIO, **options: object
                    ) -> tuple[threading.Thread, list[JobOutcome]]:
    done: list[JobOutcome] = []
    thread = threading.Thread(target=lambda: done.append(cluster.train(out=out, **options)))
    thread.start()
    return thread, done


def lose_a_node(cluster: Trains, lose: Callable[[], object], *, max_recoveries: int = 1,
                at_step: int = 3, **options: object) -> tuple[JobOutcome, str]:
    """`train` in a thread; ``lose()`` once the job is at ``at_step``;
    the outcome and everything `train` printed, once it returned."""
    out = io.StringIO()
    thread, done = train_in_thread(cluster, out, max_recoveries=max_recoveries, **options)
    support.wait_for(lambda: f"] step {at_step}" in out.getvalue(),
                     f"the job at step {at_step}", 180)
    lose()
    thread.join(600)
    [outcome] = done
    return outcome, out.getvalue()


def results(text: str) -> dict[str, list[float]]:
    """Each node's ``RESULT [...]`` line of ``bench/resumable.py``, as `train` printed it."""
    return {node: json.loads(values) for node, values in re.findall(
        r"^\[(\S+)/worker-0\] RESULT (\[.*\])$", text, re.M)}


def check_untouched(cluster: Trains, before: dict[str, str], outcome: JobOutcome,
                    text: str, want: dict[str, list[float]]) -> None:
    """No recovery fired: the job ended as an uninterrupted run (``want``: each node's
    result), every node kept its instance, and `train` named no node lost."""
    assert outcome.state == "succeeded", text
    assert outcome.recoveries == (), text
    assert results(text) == want, text
    assert " lost: " not in text and "replacing only" not in text, text
    assert {name_of(n.index): n.instance_id for n in do_up(
        str(cluster.spec), yes=True, rt=runtime()).nodes} == before
