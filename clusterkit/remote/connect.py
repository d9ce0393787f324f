"""Fabric connections to cluster nodes: host keys checked strictly against the cluster's
known_hosts (never added on the fly), the user's ssh-agent (or ``identity_file``) for
login, the agent forwarded only where ``Login.forward_agent`` asks (`exec -A`), workers
reached through the master's SSH connection (a ``direct-tcpip`` channel, what OpenSSH's
ProxyJump does)."""

from __future__ import annotations

import errno
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection

from clusterkit.errors import RemoteError
from clusterkit.netguard import check_address
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts
from clusterkit.sandboxmode import client_cut


@dataclass(frozen=True)
class Login:
    """How to log in to a cluster's nodes."""

    cluster: str
    user: str = "ubuntu"
    port: int = 22
    identity_file: str | None = None  # None: the ssh-agent (then ~/.ssh/id_*)
    connect_timeout: float = 15.0
    # Forward the user's agent only when the user asks (`exec -A`): bootstrap and job
    # calls never do, and a forwarded agent is usable by any process of the login user
    # (and root) on the node for as long as the connection lasts.
    forward_agent: bool = False

    @property
    def known_hosts(self) -> Path:
        return known_hosts.known_hosts_path(self.cluster)


@dataclass(frozen=True)
class Hop:
    """One node to reach: its label (for messages) and the address to dial."""

    label: str
    address: str


@dataclass(frozen=True)
class Target:
    """A node to run on: where to dial it, and ``via``, the gateway hop for workers
    (None: dialled directly)."""

    node: Node
    hop: Hop
    via: Hop | None = None


class _QuickAckSocket(socket.socket):
    """A TCP socket that acknowledges what it receives at once. sshd leaves Nagle's
    algorithm on outside interactive sessions, so after authentication it holds its
    channel-open confirmation until the client acknowledges the small packets before it
    (the host-key update, a debug message): a ~40 ms delayed-ACK wait on the first
    command of every connection. Linux resets quick-ACK mode on its own, so it is set
    again after every read. In the sandbox, its reads and writes fail while the sandbox
    cuts the client's connections (``refuse_if_cut``)."""

    def recv(self, size: int, flags: int = 0) -> bytes:
        refuse_if_cut()
        data = super().recv(size, flags)
        if QUICKACK is not None:
            self.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        return data

    def send(self, data: bytes, flags: int = 0) -> int:  # type: ignore[override]
        refuse_if_cut()
        return super().send(data, flags)


def refuse_if_cut() -> None:
    """The sandbox's client-side fault (``sandboxmode.client_cut``, `clusterkit sandbox
    cut-client`): while it lasts, a connection to a node fails as with no network.
    Nothing outside sandbox mode."""
    until = client_cut()
    if until is not None:
        raise OSError(errno.ENETUNREACH, f"{os.strerror(errno.ENETUNREACH)} (the sandbox "
                      f"cuts this client's connections until "
                      f"{time.strftime('%H:%M:%S', time.localtime(until))})")


QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def dial(address: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection with Nagle's algorithm off and quick ACKs. SSH is many small
    request/answer packets: with Nagle on, each exchange waits out the peer's delayed
    ACK (~40 ms on Linux), so one command on an open connection took ~100 ms instead of
    ~5 ms."""
    check_address(address, purpose="SSH")
    refuse_if_cut()
    plain = socket.create_connection((address, port), timeout=timeout)
    sock = _QuickAckSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
    sock.settimeout(timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if QUICKACK is not None:
        sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
    return sock


class _Transport(paramiko.Transport):
    """paramiko's Transport preferring AES-GCM: an AEAD cipher's tag is checked in C,
    while a separate MAC is compared byte by byte in Python on every packet (about a
    quarter of the client's CPU per node in a fan-out)."""

    _preferred_ciphers = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
                          *(c for c in paramiko.Transport._preferred_ciphers
                            if "gcm" not in c))


class _Connection(Connection):
    """Fabric's Connection dialling with ``dial`` and with a timeout on the gateway's
    direct-tcpip channel (Fabric waits for as long as the gateway's own TCP connect
    takes)."""

    def open(self) -> object:
        if self.gateway is None and not self.is_connected:
            self.connect_kwargs["sock"] = dial(self.host, int(self.port),
                                               float(self.connect_timeout))
        return super().open()

    def open_gateway(self) -> paramiko.Channel:
        self.gateway.open()
        return self.gateway.transport.open_channel(
            "direct-tcpip", (self.host, int(self.port)), ("", 0),
            timeout=self.connect_timeout)


def no_key_error(login: Login, hop: Hop) -> RemoteError:
    return RemoteError(
        f"no host key recorded for {hop.label} ({hop.address}) in {login.known_hosts}",
        f"`clusterkit up <spec>` records every node's host key on first contact; run it "
        f"again for cluster {login.cluster} (it changes nothing else on a running cluster)")


def require_recorded(login: Login, hop: Hop) -> None:
    """Refuse before dialling a node whose host key was never recorded."""
    if not known_hosts.recorded_key(login.cluster, hop.address, login.port):
        raise no_key_error(login, hop)


def connect(login: Login, hop: Hop, gateway: Connection | None = None) -> Connection:
    """A not-yet-opened Fabric connection to ``hop`` (through ``gateway`` when given)."""
    check_address(hop.address, purpose="SSH")
    require_recorded(login, hop)
    kwargs: dict[str, object] = {"allow_agent": True, "banner_timeout": login.connect_timeout,
                                 "auth_timeout": login.connect_timeout,
                                 "transport_factory": _Transport}
    if login.identity_file:
        kwargs.update(key_filename=[os.path.expanduser(login.identity_file)],
                      look_for_keys=False)
    config = Config(ssh_config=paramiko.SSHConfig(), lazy=True)  # no ~/.ssh/config surprises
    conn = _Connection(hop.address, user=login.user, port=login.port, config=config,
                       gateway=gateway, forward_agent=login.forward_agent, connect_kwargs=kwargs,
                       connect_timeout=int(max(1, login.connect_timeout)))
    conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())  # Fabric: AutoAdd
    conn.client.load_host_keys(str(login.known_hosts))
    return conn


def describe(exc: BaseException, login: Login, hop: Hop) -> RemoteError:
    """A library exception on connecting to ``hop`` as a RemoteError with a hint."""
    where = f"{login.user}@{hop.address}:{login.port}"
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        change = known_hosts.KeyChange(
            hop.label, hop.address, f"{exc.expected_key.get_name()} "
            f"{exc.expected_key.get_base64()}", f"{exc.key.get_name()} {exc.key.get_base64()}")
        refused = known_hosts.changed_error([change])
        return RemoteError(f"{where}: host key does not match the one recorded in "
                           f"{login.known_hosts}: refusing to connect: recorded "
                           f"{known_hosts.fingerprint(change.recorded)}, now presents "
                           f"{known_hosts.fingerprint(change.presented)}", refused.hint)
    if isinstance(exc, paramiko.AuthenticationException) or \
            "No authentication methods" in str(exc):
        return RemoteError(f"{where}: authentication failed ({exc})",
                           "add your key to the ssh-agent (`ssh-add`), or set "
                           "ssh.identity_file / --identity-file")
    if isinstance(exc, paramiko.ChannelException):
        return RemoteError(f"{where}: the gateway could not open a connection to it ({exc})",
                           "is the node running and its sshd up? `clusterkit status`")
    if isinstance(exc, paramiko.SSHException) and "known_hosts" in str(exc):
        return no_key_error(login, hop)
    if isinstance(exc, (OSError, socket.timeout, paramiko.SSHException, EOFError)):
        return RemoteError(f"{where}: cannot connect: {exc or type(exc).__name__}",
                           "is the node running, and does ssh.allowed_cidr admit you? "
                           "`clusterkit status`")
    return RemoteError(f"{where}: {type(exc).__name__}: {exc}")
