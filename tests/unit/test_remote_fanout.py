"""Pieces of the fan-out that need no SSH server: line-prefixed live output, the
strict host-key policy on every Fabric connection, and error translation. The runs
themselves are tested against real sshd in tests/e2e/test_exec_ssh.py."""

from __future__ import annotations

import io
import socket
import threading

import paramiko
import pytest

from clusterkit.errors import ClusterkitError, GroupError, RemoteError
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts
from clusterkit.remote.connect import (
    QUICKACK,
    Hop,
    Login,
    Target,
    _Transport,
    connect,
    describe,
    dial,
)
from clusterkit.remote.fanout import PrefixedStream, run_all


def test_prefixed_stream_emits_whole_lines_only():
    sink = io.StringIO()
    stream = PrefixedStream("w-1", sink, threading.Lock())
    stream.write("par")
    assert sink.getvalue() == ""
    stream.write("tial\nnext\nlast")
    assert sink.getvalue() == "[w-1] partial\n[w-1] next\n"
    stream.close()
    assert sink.getvalue().endswith("[w-1] last\n")


def test_connection_rejects_unknown_keys_and_loads_only_the_cluster_file(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    known_hosts.record("c", {"127.0.0.2": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFLJ"
                                          "TPC1ySRMEs3lbsOnnxTsHG3sXxQKwBm4b9Qdw8O8"})
    conn = connect(Login("c", identity_file="/k/id"), Hop("m", "127.0.0.2"))
    assert isinstance(conn.client._policy, paramiko.RejectPolicy)
    assert list(conn.client.get_host_keys()) == ["127.0.0.2"]
    assert conn.forward_agent is False  # only `exec -A` forwards the agent
    assert conn.connect_kwargs["key_filename"] == ["/k/id"]
    assert conn.connect_kwargs["look_for_keys"] is False
    forwarding = connect(Login("c", forward_agent=True), Hop("m", "127.0.0.2"))
    assert forwarding.forward_agent is True


def test_transport_prefers_aes_gcm_and_keeps_the_rest():
    preferred = _Transport._preferred_ciphers
    assert preferred[:2] == ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
    assert set(preferred) == set(paramiko.Transport._preferred_ciphers)  # nothing dropped


def test_dial_turns_off_nagle_and_delayed_acks():
    with socket.create_server(("127.0.0.1", 0)) as server:
        sock = dial("127.0.0.1", server.getsockname()[1], timeout=5)
        peer, _ = server.accept()
        with sock, peer:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            assert sock.gettimeout() == 5
            peer.sendall(b"SSH-2.0-x\r\n")
            assert sock.recv(64) == b"SSH-2.0-x\r\n"
            if QUICKACK is not None:  # re-armed after every read (Linux resets it)
                assert sock.getsockopt(socket.IPPROTO_TCP, QUICKACK) == 1


def test_dial_refuses_what_the_net_guard_refuses(monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(ClusterkitError):
        dial("203.0.113.7", 22, timeout=1)


def _node(index: int) -> Node:
    return Node(f"i-{index}", index, "running", "c5.large", "a", "spot", "r")


def test_unrecorded_node_fails_alone_before_any_connection(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    master, worker = Hop("m", "127.0.0.2"), Hop("w", "127.0.0.3")
    group = run_all(Login("c"), [Target(_node(0), master), Target(_node(1), worker, master)],
                    "true", warn=True)
    assert list(group) == ["m", "w"] and group.failed == dict(group) and not group.succeeded
    m, w = group["m"], group["w"]
    assert not m.ok and "no host key recorded for m" in m.error and m.exit_code is None
    assert m.seconds is None and (m.node.instance_id, m.address, m.via) == ("i-0", "127.0.0.2",
                                                                            None)
    assert w.error.startswith("through gateway m: no host key recorded")
    assert "clusterkit up" in w.hint and w.via == "127.0.0.2"
    with pytest.raises(GroupError) as caught:  # without warn: one error, every result
        run_all(Login("c"), [Target(_node(0), master)], "true")
    assert caught.value.group["m"].error == m.error


@pytest.mark.parametrize("exc,text", [
    (paramiko.BadHostKeyException("h", paramiko.RSAKey.generate(1024),
                                  paramiko.RSAKey.generate(1024)), "host key does not match"),
    (paramiko.AuthenticationException("denied"), "authentication failed"),
    (paramiko.SSHException("No authentication methods available"), "authentication failed"),
    (ConnectionRefusedError(111, "refused"), "cannot connect"),
    (paramiko.ChannelException(2, "Connect failed"), "gateway could not open"),
])
def test_describe(exc, text):
    err = describe(exc, Login("c"), Hop("w", "127.0.0.3"))
    assert isinstance(err, RemoteError) and text in err.message and err.hint
