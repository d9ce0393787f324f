"""Is a node reachable over SSH yet? And which public key to authorize on new nodes.

The probe does the SSH transport handshake (banner + key exchange) with paramiko and
records the host key the node presented; it does not log in (that is the bootstrap's
job, with the user's agent). Addresses come only from ``remote.address.ssh_address``,
which applies the sandbox net guard.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import paramiko

from clusterkit.errors import ClusterkitError, NotEmulated, RemoteError, UsageError
from clusterkit.plan.nodes import Node
from clusterkit.remote.address import ssh_address
from clusterkit.remote.connect import dial

DEFAULT_KEYS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_ecdsa.pub", "~/.ssh/id_rsa.pub")


def ssh_handshake(address: str, port: int, timeout: float = 5.0) -> str:
    """The host key line (``type base64``) of the SSH server at ``address:port``."""
    with dial(address, port, timeout) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.banner_timeout = timeout
            transport.start_client(timeout=timeout)
            key = transport.get_remote_server_key()
            return f"{key.get_name()} {key.get_base64()}"
        finally:
            transport.close()


def ssh_banner(address: str, port: int, timeout: float = 5.0) -> None:
    """Wait for the SSH server's identification line (``SSH-2.0-…``); no key exchange.
    Enough for a node whose host key is already pinned: the connection that follows
    checks that key strictly."""
    with dial(address, port, timeout) as sock:
        sock.settimeout(timeout)
        seen = b""
        while b"\n" not in seen and len(seen) < 4096:
            chunk = sock.recv(256)
            if not chunk:
                raise EOFError("closed before the SSH banner")
            seen += chunk
        if not any(line.startswith(b"SSH-") for line in seen.splitlines()):
            raise paramiko.SSHException(f"not an SSH server: {seen[:40]!r}")


PROBE_WORKERS = 32  # handshakes in flight at once: a silent node costs one slot, not a round


@dataclass(frozen=True)
class Probe:
    """One node's probe: the address dialled (None: none yet), the host key line it
    presented (None: no answer) and, when it did not answer, why; ``hopeless`` when
    waiting cannot help (the sandbox cannot run this node)."""

    address: str | None
    host_key: str | None
    why: str = ""
    hopeless: NotEmulated | None = None


def probe(node: Node, port: int, timeout: float, pinned: str | None = None) -> Probe:
    """Dial ``node`` once: a key exchange to read its host key, or, when its key is
    ``pinned`` (recorded earlier), only its banner, and the pinned key is the answer."""
    try:  # the sandbox maps an address only once its node has booted
        address = ssh_address(node)
    except NotEmulated as exc:
        return Probe(None, None, exc.message, hopeless=exc)
    except ClusterkitError as exc:
        return Probe(None, None, exc.message)
    try:
        if pinned is not None:
            ssh_banner(address, port, timeout=timeout)
            return Probe(address, pinned)
        return Probe(address, ssh_handshake(address, port, timeout=timeout))
    except (OSError, paramiko.SSHException, EOFError) as exc:
        return Probe(address, None, f"{address}:{port}: {exc or type(exc).__name__}")


def probe_all(nodes: Sequence[Node], port: int, timeout: float,
              pinned: Mapping[str, str] | None = None) -> Iterator[tuple[str, Probe]]:
    """(instance id, probe) of every node, as each finishes; up to ``PROBE_WORKERS``
    handshakes at once, so 64 nodes take about as long as one. ``pinned``: instance id
    -> host key of the nodes that need only a banner check (``probe``)."""
    if not nodes:
        return
    pinned = pinned or {}
    with ThreadPoolExecutor(max_workers=min(PROBE_WORKERS, len(nodes)),
                            thread_name_prefix="ssh-probe") as pool:
        futures = {pool.submit(probe, n, port, timeout, pinned.get(n.instance_id)):
                   n.instance_id for n in nodes}
        for future in as_completed(futures):
            yield futures[future], future.result()


def wait_reachable(nodes: Sequence[Node], *, port: int, deadline: float,
                   on_ready: Callable[[str, str], None] | None = None,
                   interval: float = 1.0,
                   clock: Callable[[], float] = time.monotonic,
                   check: Callable[[], None] | None = None,
                   on_round: Callable[[int, int], None] | None = None,
                   pinned: Mapping[str, str] | None = None) -> dict[str, str]:
    """Wait until every node answers SSH; {instance_id: host key line}. Each round
    probes every silent node at once (``probe_all``); a node in ``pinned`` (instance id
    -> recorded key) is only checked for its banner and answers with its pinned key.

    ``deadline`` is a ``clock()`` value; RemoteError names the nodes still silent.
    ``check`` runs before every wait between rounds and aborts the wait by raising
    (the caller's "is every node still alive?"). ``on_round(ready, total)`` follows each
    round that leaves nodes waiting, so the caller can show the wait."""
    pending = {n.instance_id: n for n in nodes}
    found: dict[str, str] = {}
    last_error: dict[str, str] = {}
    while pending:
        timeout = min(5.0, max(0.5, deadline - clock()))
        for iid, result in probe_all(list(pending.values()), port, timeout, pinned):
            if result.hopeless is not None:
                raise result.hopeless
            if result.host_key is None:
                last_error[iid] = result.why
                continue
            found[iid] = result.host_key
            del pending[iid]
            if on_ready and result.address:
                on_ready(iid, result.address)
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
    `up` probe does, all at once); nodes that do not answer are left out."""
    out: dict[str, str] = {}
    for iid, result in probe_all(nodes, port, timeout):
        if result.host_key is not None:
            out[iid] = result.host_key
    return out
