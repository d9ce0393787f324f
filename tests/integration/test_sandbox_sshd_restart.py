"""`clusterkit sandbox restart-sshd` for real (the CLI, a real sshd node): while the
node's sshd is down a new connection is refused; then it listens again with the same host
key (checked against known_hosts); a session opened before goes on through the restart,
and so does a process detached from one; the node is the same (its sshd, PID 1 there,
kept its process). A node that does not run is refused with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clusterkit.plan.nodes import INDEX_TAG
from clusterkit_sandbox import nodeprocs
from clusterkit_sandbox.sshdrestart import listening
from tests import support
from tests.conftest import SandboxCluster

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
CLI = str(Path(sys.executable).with_name("clusterkit"))


def _cli(cluster: SandboxCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args, "--dir", str(cluster.sandbox.dir)], capture_output=True,
                          text=True, timeout=60, env={**cluster.sandbox.env})


def test_restart_sshd_refuses_connections_while_down_and_keeps_the_sessions(
        sandbox_cluster: SandboxCluster) -> None:
    [node] = sandbox_cluster.launch(1)
    sandbox_cluster.ec2.create_tags(Resources=[node.instance_id], Tags=[
        {"Key": INDEX_TAG, "Value": "1"}])
    record = sandbox_cluster.sandbox.nodes()[node.instance_id]
    [init] = nodeprocs.inits(nodeprocs.pids_in_ns(record["pidns"]))
    detached = sandbox_cluster.run(node, "setsid sleep 300 >/dev/null 2>&1 </dev/null & "
                                         "echo $!").stdout.strip()
    session = subprocess.Popen(sandbox_cluster.ssh_argv(node, "while read l; do echo got $l; "
                                                              "done"),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert session.stdin is not None and session.stdout is not None
    session.stdin.write("before\n")
    session.stdin.flush()
    assert session.stdout.readline() == "got before\n"
    done: list[subprocess.CompletedProcess] = []
    fault = threading.Thread(target=lambda: done.append(_cli(
        sandbox_cluster, "--json", "sandbox", "restart-sshd", sandbox_cluster.name,
        "worker-1", "--down", "3s")))
    fault.start()
    try:
        support.wait_for(lambda: not listening(node.address), "sshd down", 20,
                         interval=0.05)
        refused = sandbox_cluster.run(node, "true", check=False)
        assert refused.returncode == 255 and "refused" in refused.stderr, refused.stderr
    finally:
        fault.join(60)
    [out] = done
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert said["instance_id"] == node.instance_id and said["pid"] == init
    assert said["down_s"] >= 3
    # up again: same host key (StrictHostKeyChecking against known_hosts), same node
    assert sandbox_cluster.run(node, f"kill -0 {detached} && echo alive").stdout == "alive\n"
    session.stdin.write("after\n")
    session.stdin.flush()
    assert session.stdout.readline() == "got after\n"
    session.stdin.close()
    assert session.wait(10) == 0
    assert nodeprocs.inits(nodeprocs.pids_in_ns(record["pidns"])) == [init]


def test_restart_sshd_of_a_node_that_does_not_run_exits_2(
        sandbox_cluster: SandboxCluster) -> None:
    out = _cli(sandbox_cluster, "sandbox", "restart-sshd", sandbox_cluster.name, "worker-7")
    assert out.returncode == 2 and "no running node worker-7" in out.stderr, out.stderr
    out = _cli(sandbox_cluster, "sandbox", "restart-sshd", sandbox_cluster.name, "master",
               "--down", "soon")
    assert out.returncode == 2 and "not a duration" in out.stderr, out.stderr
