"""clusterkit_sandbox/nodeprocs.py without a sandbox: namespaces named, this machine's
own never counted as a node's, a PID namespace's init told from the rest."""

from __future__ import annotations

import os
import subprocess

import pytest

from clusterkit_sandbox import nodeprocs
from tests import support


def test_this_processs_namespaces_are_its_own_and_never_a_nodes():
    mnt, pid = nodeprocs.mount_ns(os.getpid()), nodeprocs.pid_ns(os.getpid())
    assert mnt and mnt.startswith("mnt:[") and pid and pid.startswith("pid:[")
    assert nodeprocs.own(mnt) and nodeprocs.own(pid) and not nodeprocs.own(None)
    # a record naming them finds only the boot process, never this machine's processes
    assert nodeprocs.node_pids(4242, mnt, pid) == [4242]


def test_pids_in_ns_matches_by_kind(monkeypatch: pytest.MonkeyPatch):
    links = {"10": {"mnt": "mnt:[1]", "pid": "pid:[7]"}, "11": {"mnt": "mnt:[2]",
                                                               "pid": "pid:[7]"}}
    monkeypatch.setattr(nodeprocs.os, "listdir", lambda _: [*links, "self"])
    monkeypatch.setattr(nodeprocs, "_ns", lambda p, kind: links[str(p)][kind])
    monkeypatch.setattr(nodeprocs, "_alive", lambda p: True)
    assert nodeprocs.pids_in_ns("pid:[7]") == [10, 11]
    assert nodeprocs.pids_in_ns("mnt:[2]") == [11]


@pytest.mark.root
def test_the_init_of_a_pid_namespace_is_found():
    """A real PID namespace (unshare --pid --fork): its init is pid 1 inside, the
    unshare process is not, and stop ends both."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sleep", "300"])
    try:
        def born() -> str | None:  # unshare made the namespace and forked its init
            ns = nodeprocs.pid_ns(proc.pid, children=True)
            return ns if ns and not nodeprocs.own(ns) and nodeprocs.pids_in_ns(ns) else None

        ns = support.wait_for(born, "the PID namespace's init")
        (init,) = nodeprocs.pids_in_ns(ns)
        assert nodeprocs.inits([proc.pid, init]) == [init]
        nodeprocs.stop(proc.pid, None, ns)
        proc.wait(timeout=10)
        assert nodeprocs.pids_in_ns(ns) == []
    finally:
        proc.kill()
        proc.wait()
