"""The caller's public address, for the default SSH ingress rule (``<ip>/32``).

Order: ``CLUSTERKIT_CALLER_CIDR`` (override, e.g. behind NAT or in CI; the sandbox
environment sets ``127.0.0.1/32``); otherwise one HTTPS GET to AWS's own
``https://checkip.amazonaws.com`` (the service behind "My IP" in the console). If that
fails, clusterkit refuses to guess (and never falls back to 0.0.0.0/0): the spec must
set ``ssh.allowed_cidr``.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request

from clusterkit.errors import UsageError
from clusterkit.netguard import check_url

OVERRIDE_ENV = "CLUSTERKIT_CALLER_CIDR"
CHECKIP_URL = "https://checkip.amazonaws.com"


def _as_cidr(text: str) -> str:
    text = text.strip()
    net = ipaddress.ip_network(text if "/" in text else f"{text}/32", strict=False)
    return str(net)


def caller_cidr(timeout: float = 5.0) -> str:
    """The CIDR SSH is allowed from when the spec gives no ``ssh.allowed_cidr``."""
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        try:
            return _as_cidr(override)
        except ValueError as exc:
            raise UsageError(f"{OVERRIDE_ENV}={override!r} is not an IPv4 address or CIDR",
                             "e.g. 203.0.113.7/32") from exc
    check_url(CHECKIP_URL, purpose="caller address lookup")
    try:
        with urllib.request.urlopen(CHECKIP_URL, timeout=timeout) as resp:  # noqa: S310
            return _as_cidr(resp.read(64).decode("ascii", "replace"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot determine your public IP address for the SSH rule ({exc})",
            "set ssh.allowed_cidr in the spec (e.g. 203.0.113.7/32) or "
            f"{OVERRIDE_ENV}; clusterkit never opens SSH to 0.0.0.0/0 by default") from exc
