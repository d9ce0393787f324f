"""Network safety for sandbox mode.

In sandbox mode (``--sandbox`` or ``CLUSTERKIT_SANDBOX=1``) every connection
clusterkit opens, SSH or HTTP, must go to 127.0.0.0/8. Anything else is refused
here, before a packet is sent: hostnames other than ``localhost`` are refused
without being resolved (a DNS lookup is itself a packet).
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from clusterkit.errors import NetworkSafetyError

SANDBOX_ENV = "CLUSTERKIT_SANDBOX"
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


def sandbox_mode() -> bool:
    return os.environ.get(SANDBOX_ENV, "") not in ("", "0", "false", "no")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")) in _LOOPBACK
    except ValueError:
        return False


def check_address(host: str, *, purpose: str) -> None:
    """Raise NetworkSafetyError if sandbox mode is on and ``host`` is not loopback."""
    if sandbox_mode() and not is_loopback(host):
        raise NetworkSafetyError(
            f"sandbox mode refused a {purpose} connection to {host!r}: only 127.0.0.0/8 "
            "is allowed",
            "the emulator hands out fake addresses; connect through the address hook "
            "(clusterkit.remote.address) or unset CLUSTERKIT_SANDBOX to use real AWS")


def check_url(url: str, *, purpose: str) -> None:
    check_address(urlsplit(url).hostname or "", purpose=purpose)
