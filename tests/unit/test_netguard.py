"""The net guard: in sandbox mode nothing but 127.0.0.0/8 is ever dialled."""

from __future__ import annotations

import socket

import pytest

from clusterkit.aws.session import client, make_session
from clusterkit.errors import NetworkSafetyError
from clusterkit.netguard import check_address, check_url, is_loopback, sandbox_mode


@pytest.fixture
def sandbox_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record (and refuse) every outgoing connection attempt."""
    calls: list = []

    def forbidden(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", forbidden)
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    monkeypatch.setattr(socket, "getaddrinfo", forbidden)
    return calls


@pytest.mark.parametrize("value,expected", [("1", True), ("", False), ("0", False),
                                            ("false", False), ("yes", True)])
def test_sandbox_mode_from_env(monkeypatch, value, expected):
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", value)
    assert sandbox_mode() is expected


@pytest.mark.parametrize("host,ok", [("127.0.0.1", True), ("127.0.3.9", True),
                                     ("localhost", True), ("[::1]", False),
                                     ("192.0.2.1", False), ("10.0.0.5", False),
                                     ("ec2.us-east-1.amazonaws.com", False), ("", False)])
def test_is_loopback(host, ok):
    assert is_loopback(host) is ok


def test_check_address_refuses_only_in_sandbox_mode(monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    check_address("192.0.2.1", purpose="SSH")  # real AWS mode: allowed
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(NetworkSafetyError, match="192.0.2.1") as info:
        check_address("192.0.2.1", purpose="SSH")
    assert info.value.hint and "address hook" in info.value.hint
    check_url("http://127.0.0.1:5000/", purpose="AWS API")
    with pytest.raises(NetworkSafetyError):
        check_url("https://ec2.us-east-1.amazonaws.com/", purpose="AWS API")


def test_boto3_client_refuses_non_loopback_endpoint_before_any_packet(
        sandbox_on, no_sockets, monkeypatch):
    """A client from clusterkit.aws.session.client on TEST-NET-1: refused before any
    connect or DNS call (sockets are patched to fail loudly) and not retried: the
    refusal is no network error botocore would back off and try again."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://192.0.2.1:4566")
    ec2 = client(make_session("us-east-1"), "ec2")
    attempts = []
    ec2.meta.events.register_first("before-send", lambda **_: attempts.append(1))
    with pytest.raises(NetworkSafetyError, match="192.0.2.1"):
        ec2.describe_instances()
    assert len(attempts) == 1
    assert no_sockets == []


def test_boto3_client_refuses_real_aws_hostname(sandbox_on, no_sockets, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    ec2 = client(make_session("us-east-1"), "ec2")
    with pytest.raises(NetworkSafetyError, match="amazonaws.com"):
        ec2.describe_instances()
    assert no_sockets == []


def test_the_test_session_itself_refuses_off_loopback_connections():
    """tests/netsafety.py is installed for every test: a connection or a name lookup
    outside 127.0.0.0/8 fails before any packet, even from code that catches OSError."""
    import socket

    from tests.netsafety import OffLoopbackConnection

    with pytest.raises(OffLoopbackConnection):
        socket.create_connection(("192.0.2.1", 443), timeout=0.1)
    with pytest.raises(OffLoopbackConnection):
        socket.getaddrinfo("checkip.amazonaws.com", 443)
    with socket.socket() as sock, pytest.raises(OffLoopbackConnection):
        sock.connect_ex(("169.254.169.254", 80))
