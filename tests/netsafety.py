"""Test-session network guard: no test may open a connection outside 127.0.0.0/8.

Installed by tests/conftest.py for the whole pytest process, below every library:
``socket.connect``/``connect_ex`` to a non-loopback address, and name lookups of
anything but IP literals and ``localhost``, raise ``OffLoopbackConnection`` before a
packet is sent. It derives from RuntimeError, not OSError, so code that tolerates
network errors cannot swallow it. Child processes are covered by the product's own
guard (clusterkit.netguard) and by AWS_EC2_METADATA_DISABLED, which stops botocore
from probing the instance metadata address for credentials.
"""

from __future__ import annotations

import ipaddress
import os
import socket

_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class OffLoopbackConnection(RuntimeError):
    """A test tried to reach an address outside 127.0.0.0/8."""


def _allowed_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in (None, "", "localhost"):
        return True
    try:
        addr = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return addr in _LOOPBACK or addr == ipaddress.ip_address("::1")


def _check(sock: socket.socket, address: object) -> None:
    inet = sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
    if inet and not _allowed_host(address[0]):
        raise OffLoopbackConnection(f"test tried to connect to {address!r}")


def _connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)


def _connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host, *args, **kwargs):
    if not _allowed_host(host):
        raise OffLoopbackConnection(f"test tried to resolve {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]
