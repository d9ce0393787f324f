"""remote.probe: the SSH wait of `up` probes every silent node at once, so one node
that hangs does not hold up the others (a real paramiko SSH server on loopback)."""

from __future__ import annotations

import socket
import threading
import time

import paramiko
import pytest

from clusterkit.errors import RemoteError
from clusterkit.plan.nodes import Node
from clusterkit.remote.probe import presented_keys, wait_reachable


def _node(iid: str, address: str) -> Node:
    return Node(iid, 0, "running", "c5.large", "us-east-1a", "on-demand", "us-east-1",
                public_ip=address)


def _serve_ssh(sock: socket.socket, key: paramiko.PKey, stop: threading.Event) -> None:
    """Answer each connection with an SSH transport (banner + key exchange), each in
    paramiko's own thread."""
    sock.settimeout(0.1)
    transports = []
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        transport = paramiko.Transport(conn)
        transport.add_server_key(key)
        transport.start_server(event=threading.Event(), server=paramiko.ServerInterface())
        transports.append(transport)
    for transport in transports:
        transport.close()


def _serve_silence(sock: socket.socket, log: list[str], stop: threading.Event) -> None:
    """Accept and never speak; note when the prober hangs up."""
    sock.settimeout(0.1)
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(None)
            while conn.recv(1024):  # the prober's banner, then b"" once it hangs up
                pass
            log.append("silent closed")  # (sequential probing would log this first)


@pytest.fixture
def servers():
    """(port, silent node address, SSH node address, event log, the SSH server's key)."""
    host_key = paramiko.RSAKey.generate(1024)
    good = socket.socket()
    good.bind(("127.0.0.1", 0))
    port = good.getsockname()[1]
    silent = socket.socket()
    try:
        silent.bind(("127.0.0.2", port))
    except OSError:
        good.close()
        pytest.skip("127.0.0.2 cannot bind the same port")
    good.listen(8)
    silent.listen(8)
    log: list[str] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_serve_ssh, args=(good, host_key, stop), daemon=True),
               threading.Thread(target=_serve_silence, args=(silent, log, stop), daemon=True)]
    for t in threads:
        t.start()
    yield port, "127.0.0.2", "127.0.0.1", log, host_key
    stop.set()
    for t in threads:
        t.join(timeout=5)
    good.close()
    silent.close()


def test_a_hanging_node_does_not_hold_up_the_others(servers):
    port, silent, good, log, host_key = servers
    nodes = [_node("i-silent", silent), _node("i-good", good)]  # the silent one first

    def ready(iid: str, address: str) -> None:
        log.append(f"{iid} ready")

    with pytest.raises(RemoteError) as err:
        # a deadline generous for the good node's key exchange on a loaded machine,
        # which the silent node never meets
        wait_reachable(nodes, port=port, deadline=time.monotonic() + 3, interval=0.05,
                       on_ready=ready)
    assert "i-silent" in err.value.message and "i-good" not in err.value.message
    # probed together: the good node answered while the silent one was still connected
    assert log[0] == "i-good ready", log
    keys = presented_keys(nodes, port, timeout=3)
    assert keys == {"i-good": f"{host_key.get_name()} {host_key.get_base64()}"}


def test_a_pinned_node_answers_with_its_banner_and_pinned_key(servers):
    """A node whose key is already recorded needs no key exchange: its banner is enough,
    and the pinned key is the answer (the connection that follows checks it)."""
    port, silent, good, _log, host_key = servers
    pinned = {"i-good": "ssh-ed25519 PINNED"}
    found = wait_reachable([_node("i-good", good)], port=port,
                           deadline=time.monotonic() + 2, interval=0.05, pinned=pinned)
    assert found == pinned
    with pytest.raises(RemoteError) as err:  # no banner: still silent, pinned or not
        wait_reachable([_node("i-silent", silent)], port=port, interval=0.05,
                       deadline=time.monotonic() + 0.5, pinned={"i-silent": "ssh-ed25519 X"})
    assert "i-silent" in err.value.message


def test_a_server_that_is_not_ssh_is_not_ready():
    """Something else listening on the port does not count as the node's sshd."""
    from clusterkit.remote.probe import ssh_banner

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def answer() -> None:
        conn, _ = sock.accept()
        with conn:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    with pytest.raises(paramiko.SSHException):
        ssh_banner("127.0.0.1", sock.getsockname()[1], timeout=2)
    thread.join(timeout=5)
    sock.close()
