"""`clusterkit sandbox restart-sshd`: a node's sshd restarted, as `systemctl restart ssh`
does on an instance: its listener closes, a connection to the node is refused while it is
down (``down`` seconds), then a new sshd listens on the same address with the same host
key; the sessions it started go on (the job's supervisor was started through one, the
client's followers run in them), as under systemd's ``KillMode=process``.

A node's sshd is its PID 1 (``node``): killing it would end the node's every process. So
the sandbox restarts it the way sshd restarts itself on SIGHUP: it closes its listening
socket and executes itself again (a new sshd, rereading its config), leaving the sessions
it forked running. Twice: first with its listener moved to a free port of the node's
address that no client dials, held for ``down`` s (port 22 refuses), then on port 22
again. Without namespaces (not root) the node's sshd is the process the agent started."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from clusterkit_sandbox import nodeprocs
from clusterkit_sandbox.imds import check_name, running_instance
from clusterkit_sandbox.node import wait_listening
from clusterkit_sandbox.state import NODES_FILE, RUN_DIR, read_json

SSH_PORT = 22
LISTEN_WAIT = 10.0  # seconds for the re-executed sshd to close, or open, port 22


def do_restart_sshd(directory: str | None, cluster: str, node: str, *, down: float = 5.0,
                    region: str = "us-east-1") -> dict[str, Any]:
    """Restart NODE's sshd, refusing connections for ``down`` s; returns once it listens
    on port 22 again. ValueError for a node that is not running in the sandbox;
    RuntimeError when its sshd does not close or open its port in time."""
    from clusterkit_sandbox.state import state_dir

    check_name(cluster)
    if down < 0:
        raise ValueError(f"--down {down}: not a length of time")
    iid = running_instance(directory, cluster, node, region)
    record = (read_json(state_dir(directory) / NODES_FILE) or {}).get(iid or "")
    if iid is None or not record or not record.get("address"):
        raise ValueError(f"no running node {node} of cluster {cluster} in {region}")
    config = state_dir(directory) / RUN_DIR / "nodes" / iid / "conf" / "sshd_config"
    pid, address = sshd_pid(record), record["address"]
    kept = config.read_text()
    began = time.monotonic()
    try:
        if down > 0:
            port = free_port(address)
            replace_text(config, kept.replace(f"{address}:{SSH_PORT}", f"{address}:{port}"))
        os.kill(pid, signal.SIGHUP)  # closes port 22 and executes itself again
        if down > 0:
            _wait(lambda: not listening(address), f"{node}'s sshd closing port 22")
            # listening again (elsewhere): its SIGHUP handler is set, it may restart
            _wait(lambda: listening(address, port), f"{node}'s sshd starting again")
            time.sleep(max(0.0, down - (time.monotonic() - began)))
    finally:
        if config.read_text() != kept:
            replace_text(config, kept)
            os.kill(pid, signal.SIGHUP)  # on port 22 again
    if not wait_listening(address, LISTEN_WAIT, SSH_PORT):
        raise RuntimeError(f"{node}'s sshd (pid {pid}) does not listen on {address}:22 "
                           f"again after its restart")
    return {"cluster": cluster, "node": node, "instance_id": iid, "pid": pid,
            "down_s": round(time.monotonic() - began, 3)}


def sshd_pid(record: dict[str, Any]) -> int:
    """The node's sshd: the init of its PID namespace (as root), else the process the
    agent started (no namespaces: sshd itself)."""
    pidns = record.get("pidns")
    if pidns and not nodeprocs.own(pidns):
        found = nodeprocs.inits(nodeprocs.pids_in_ns(pidns))
        if len(found) == 1:
            return found[0]
        raise ValueError(f"node {record.get('instance_id')}: no sshd found in its PID "
                         f"namespace")
    if not record.get("pid"):
        raise ValueError(f"node {record.get('instance_id')} runs no sshd")
    return int(record["pid"])


def free_port(address: str) -> int:
    """A port of ``address`` that nothing listens on now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def listening(address: str, port: int = SSH_PORT) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, port)) == 0


def replace_text(path: Path, text: str) -> None:
    """``text`` replaces ``path`` whole (a rename: sshd never reads half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _wait(ready: Any, what: str) -> None:
    deadline = time.monotonic() + LISTEN_WAIT
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
