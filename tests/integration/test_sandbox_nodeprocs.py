"""A sandbox node's processes (clusterkit_sandbox/nodeprocs.py): inside, a node sees only
its own (its own PID namespace and /proc); from here the sandbox finds every one of them,
and stopping the node leaves none, even one that left the node's mount namespace. Real
daemon, real sshd nodes on loopback."""

from __future__ import annotations

import subprocess

import pytest

from clusterkit_sandbox import nodeprocs
from tests import support
from tests.conftest import SandboxCluster

pytestmark = [pytest.mark.sandbox, pytest.mark.root]


def _pgrep(argv0: str) -> list[int]:
    """The processes whose command line starts with ``argv0``."""
    out = subprocess.run(["pgrep", "-f", f"^{argv0}"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return [int(p) for p in out.stdout.split()]


def test_a_node_sees_only_its_own_processes(sandbox_cluster: SandboxCluster) -> None:
    """A process of this machine's (its command line carries a marker) is not in the
    node's /proc nor in its `ps`; the node's pids are exactly its PID namespace's, and its
    PID 1 is its own sshd."""
    marker = support.unique_name("ck-host-proc")
    host = subprocess.Popen(["bash", "-c", f"exec -a {marker} sleep 300"])
    try:
        (node,) = sandbox_cluster.launch(1)
        cmdlines = sandbox_cluster.run(node, "cat /proc/[0-9]*/cmdline 2>/dev/null "
                                             "| tr '\\0' ' '").stdout
        ps = sandbox_cluster.run(node, "ps -eo pid=,args=").stdout
        listed = sandbox_cluster.run(node, "ls /proc | grep -xE '[0-9]+' | sort -n").stdout
        assert marker not in cmdlines and marker not in ps, (cmdlines, ps)
        pids = [int(p) for p in listed.split()]
        assert pids[0] == 1 and str(host.pid) not in ps.split()
        first = next(line for line in ps.splitlines() if line.split()[:1] == ["1"])
        assert "sshd" in first and "/etc/clusterkit-node/sshd_config" in first
        record = sandbox_cluster.sandbox.nodes()[node.instance_id]
        inside = nodeprocs.pids_in_ns(record["pidns"])
        assert host.pid not in inside and record["pid"] not in inside
        assert len(nodeprocs.inits(inside)) == 1  # its sshd, PID 1 there
    finally:
        host.kill()
        host.wait()


def test_stopping_a_node_ends_every_process_it_started(sandbox_cluster: SandboxCluster):
    """A detached job, and one that made a mount namespace of its own (so a mount
    namespace's sweep alone would miss it), end when the instance stops."""
    (node,) = sandbox_cluster.launch(1)
    job = support.unique_name("ck-node-job")
    escaped = support.unique_name("ck-node-escaped")
    sandbox_cluster.run(node, f"(setsid bash -c 'exec -a {job} sleep 300' "
                              ">/dev/null 2>&1 </dev/null &); "
                              f"(sudo -n setsid unshare --mount bash -c 'exec -a {escaped} "
                              "sleep 300' >/dev/null 2>&1 </dev/null &)")
    support.wait_for(lambda: _pgrep(job) and _pgrep(escaped), "both jobs running")
    record = sandbox_cluster.sandbox.nodes()[node.instance_id]
    (loner,) = _pgrep(escaped)
    assert nodeprocs.mount_ns(loner) != record["mntns"]
    assert loner in nodeprocs.node_pids(record["pid"], record["mntns"], record["pidns"])
    sandbox_cluster.ec2.stop_instances(InstanceIds=[node.instance_id])
    sandbox_cluster.sandbox.wait_nodes([node.instance_id], states=("stopped",))
    support.wait_for(lambda: not _pgrep(job) and not _pgrep(escaped), "both jobs ended")
    assert nodeprocs.pids_in_ns(record["pidns"]) == []
