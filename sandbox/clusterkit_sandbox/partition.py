"""`clusterkit sandbox partition`: a node that stops answering, as a node cut off by the
network (or hung) does: every process of the emulated node (its sshd, its sessions, the
job's supervisor and processes, all in the node's own PID namespace: ``nodeprocs``) is
frozen with SIGSTOP, so connections to it open (the kernel still accepts them) and nothing answers;
``heal`` thaws them (SIGCONT). Terminating the instance still ends the node (SIGKILL
reaches stopped processes)."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from clusterkit_sandbox import nodeprocs
from clusterkit_sandbox.imds import check_name, running_instance
from clusterkit_sandbox.state import NODES_FILE, read_json


def do_partition(directory: str | None, cluster: str, node: str, *, heal: bool = False,
                 region: str = "us-east-1") -> dict[str, Any]:
    """Freeze (``heal``: thaw) every process of NODE of CLUSTER; ValueError for a node
    that is not running in the sandbox."""
    from clusterkit_sandbox.state import state_dir

    check_name(cluster)
    iid = running_instance(directory, cluster, node, region)
    record = (read_json(state_dir(directory) / NODES_FILE) or {}).get(iid or "")
    if iid is None or not record or not record.get("mntns"):
        raise ValueError(f"no running node {node} of cluster {cluster} in {region}")
    pids = node_pids(record)
    send = signal.SIGCONT if heal else signal.SIGSTOP
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, send)
    return {"cluster": cluster, "node": node, "instance_id": iid,
            "state": "healed" if heal else "partitioned", "processes": len(pids)}


def node_pids(record: dict[str, Any]) -> list[int]:
    """The node's boot process and everything in its PID and mount namespaces
    (``nodeprocs``); ValueError when a namespace is this process's own (it would freeze
    the host's processes)."""
    for kind, ns in (("mount", record["mntns"]), ("PID", record.get("pidns"))):
        if nodeprocs.own(ns):
            raise ValueError(f"node {record.get('instance_id')} shares this machine's "
                             f"{kind} namespace: not partitioned")
    return nodeprocs.node_pids(record.get("pid"), record["mntns"], record.get("pidns"))
