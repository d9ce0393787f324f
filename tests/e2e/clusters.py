"""What the e2e modules share to run a cluster of their own in the sandbox: a spec's
common header, a real ssh-agent holding a fresh key, the user's environment pointed at
the sandbox, and a cluster `up` brings up and `down` must leave nothing of.

A module fixture reads::

    with user_session(sandbox, where), running(spec, name) as up:
        yield ...

Not a test module: only helpers (the fixtures stay in the modules that use them)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import UpResult, do_up
from clusterkit_sandbox.node import SHARED_IN_NODE, shared_dir
from tests import support
from tests.e2e.test_up_down import SANDBOX_AMI
from tests.integration.conftest import leftovers, runtime

if TYPE_CHECKING:
    from tests.conftest import SandboxHandle

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
