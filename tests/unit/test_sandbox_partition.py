"""sandbox/partition.py: the processes a partition freezes are the node's own, never
this machine's (a record naming this process's mount namespace is refused)."""

from __future__ import annotations

import os

import pytest

from clusterkit_sandbox import node as nodes
from clusterkit_sandbox import nodeprocs
from clusterkit_sandbox.partition import node_pids


def test_a_node_in_this_machines_namespace_is_refused():
    own = nodes.mount_ns(os.getpid())
    assert own is not None
    with pytest.raises(ValueError, match="shares this machine's mount namespace"):
        node_pids({"instance_id": "i-1", "mntns": own, "pid": os.getpid()})


def test_a_node_in_this_machines_pid_namespace_is_refused():
    own = nodeprocs.pid_ns(os.getpid())
    assert own is not None
    with pytest.raises(ValueError, match="shares this machine's PID namespace"):
        node_pids({"instance_id": "i-1", "mntns": "mnt:[1]", "pidns": own, "pid": 1})


def test_a_node_is_its_boot_process_and_its_namespaces(monkeypatch: pytest.MonkeyPatch):
    """Its mount namespace and its PID namespace: a process that made a mount namespace
    of its own is still the node's."""
    found = {"mnt:[1]": [30, 10], "pid:[2]": [10, 40]}
    monkeypatch.setattr(nodeprocs, "pids_in_ns", lambda ns: found.get(ns, []))
    assert node_pids({"mntns": "mnt:[1]", "pid": 20}) == [10, 20, 30]
    assert node_pids({"mntns": "mnt:[1]", "pidns": "pid:[2]", "pid": 20}) == [10, 20, 30, 40]
