"""Is a node reachable over SSH yet? And which public key to authorize on new nodes.

The probe does the SSH transport handshake (banner + key exchange) with paramiko and
records the host key the node presented; it does not log in (that is the bootstrap's
job, with the user's agent). Addresses come only from ``remote.address.ssh_address``,
which applies the sandbox net guard.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import paramiko

from clusterkit.errors import ClusterkitError, NotEmulated, RemoteError, UsageError
from clusterkit.plan.nodes import Node
from clusterkit.remote.address import ssh_address

DEFAULT_KEYS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_ecdsa.pub", "~/.ssh/id_rsa.pub")


def ssh_handshake(address: str, port: int, timeout: float = 5.0) -> str:
    """The host key line (``type base64``) of the SSH server at ``address:port``."""
    with socket.create_connection((address, port), timeout=timeout) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.banner_timeout = timeout
            transport.start_client(timeout=timeout)
            key = transport.get_remote_server_key()
            return f"{key.get_name()} {key.get_base64()}"
        finally:
            transport.close()


def wait_reachable(nodes: Sequence[Node], *, port: int, deadline: float,
                   on_ready: Callable[[str, str], None] | None = None,
                   interval: float = 1.0,
                   clock: Callable[[], float] = time.monotonic,
                   check: Callable[[], None] | None = None,
                   on_round: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """Wait until every node answers SSH; {instance_id: host key line}.

    ``deadline`` is a ``clock()`` value; RemoteError names the nodes still silent.
    ``check`` runs before every wait between rounds and aborts the wait by raising
    (the caller's "is every node still alive?"). ``on_round(ready, total)`` follows each
    round that leaves nodes waiting, so the caller can show the wait."""
    pending = {n.instance_id: n for n in nodes}
    found: dict[str, str] = {}
    last_error: dict[str, str] = {}
    while pending:
        for iid, node in list(pending.items()):
            try:  # the sandbox maps an address only once its node has booted
                address = ssh_address(node)
            except NotEmulated:  # the sandbox cannot run this node: waiting won't help
                raise
            except ClusterkitError as exc:
                last_error[iid] = exc.message
                continue
            try:
                found[iid] = ssh_handshake(address, port, timeout=min(5.0, max(
                    0.5, deadline - clock())))
            except (OSError, paramiko.SSHException, EOFError) as exc:
                last_error[iid] = f"{address}:{port}: {exc or type(exc).__name__}"
                continue
            del pending[iid]
            if on_ready:
                on_ready(iid, address)
        if pending and clock() >= deadline:
            detail = "; ".join(f"{i} ({last_error.get(i, 'no answer')})" for i in pending)
            raise RemoteError(f"SSH not reachable before the deadline on {len(pending)} "
                              f"node(s): {detail}",
                              "check ssh.allowed_cidr and the security group; run `clusterkit "
                              "up` again to resume (it reuses the running nodes), or "
                              "--timeout to wait longer",
                              results=last_error)
        if pending:
            if on_round:
                on_round(len(found), len(found) + len(pending))
            if check:
                check()
            time.sleep(interval)
    return found


def local_public_key(identity_file: str | None = None) -> str:
    """The public key to import as the cluster's key pair (``type base64 comment``):
    ``identity_file``.pub, else the first key in the ssh-agent, else ~/.ssh/id_*.pub."""
    if identity_file:
        pub = Path(os.path.expanduser(identity_file + ".pub"))
        if pub.is_file():
            return pub.read_text().strip()
        try:
            key = paramiko.PKey.from_path(os.path.expanduser(identity_file))
        except (OSError, paramiko.SSHException) as exc:
            raise UsageError(f"cannot read ssh.identity_file {identity_file}: {exc}",
                             "point it at a private key whose .pub sits next to it") from exc
        return f"{key.get_name()} {key.get_base64()} clusterkit"
    try:
        agent_keys = paramiko.Agent().get_keys()
    except paramiko.SSHException:
        agent_keys = ()
    if agent_keys:
        key = agent_keys[0]
        return f"{key.get_name()} {key.get_base64()} clusterkit-agent"
    for candidate in DEFAULT_KEYS:
        path = Path(os.path.expanduser(candidate))
        if path.is_file():
            return path.read_text().strip()
    raise UsageError("no SSH public key to authorize on the nodes",
                     "start an ssh-agent with your key (ssh-add), set ssh.identity_file, or "
                     "name an existing EC2 key pair in ssh.key_name")


def presented_keys(nodes: Sequence[Node], port: int,
                   timeout: float = 5.0) -> dict[str, str]:
    """{instance id: host key line} each node presents now, dialled directly (as the
    `up` probe does); nodes that do not answer are left out."""
    out: dict[str, str] = {}
    for node in nodes:
        try:
            out[node.instance_id] = ssh_handshake(ssh_address(node), port, timeout=timeout)
        except (ClusterkitError, OSError, paramiko.SSHException, EOFError):
            continue
    return out
