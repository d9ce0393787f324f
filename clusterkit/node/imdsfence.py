"""The fence around the recovery controller's role on the master (pure: no I/O).

While the master wears the controller's instance profile, every other user's
connections to the instance metadata (``169.254.169.254:80``) go to a small proxy the
controller runs (``imdsproxy``), by an iptables nat rule on the kernel's OUTPUT chain
that matches the socket's owner, as kube2iam does: the controller's own user and root
reach the metadata itself. The proxy answers every path but the role's credentials
(``refused``), so the master's interruption watcher, which runs as the login user,
still reads its notices, its instance id and its identity.

``rule_argv`` is the rule as an iptables command line, built only of checked values
(a user name, a loopback address and a port: ``FenceError`` for anything else), never
of text a user typed. ``refused`` is the proxy's path filter.
"""

from __future__ import annotations

import enum
import ipaddress
import re

METADATA_ADDRESS = "169.254.169.254"
METADATA_PORT = 80
CONTROLLER_USER = "clusterkit-ctl"  # the controller's system user on the master
PROXY_PORT = 8911  # where the proxy listens (on loopback)
# the path components under any version (``latest``, ``2021-07-15``) that carry a role's
# credentials: the instance profile's, and the instance identity's (EC2 serves both)
SECRET_PREFIXES = (("meta-data", "iam", "security-credentials"),
                   ("meta-data", "identity-credentials"))
PATH_RE = re.compile(r"/[A-Za-z0-9._/-]*")
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


class FenceError(ValueError):
    """A value the rule cannot be built of."""


class Action(enum.Enum):
    """What iptables does with the rule."""

    ADD = "-A"
    DELETE = "-D"
    CHECK = "-C"


def rule_argv(action: Action, to_address: str, to_port: int = PROXY_PORT,
              user: str = CONTROLLER_USER) -> list[str]:
    """``iptables`` adding, deleting or checking the rule that sends every user's TCP
    connections to the metadata, but ``user``'s and root's, to ``to_address:to_port``
    (a loopback address: the proxy on this machine)."""
    if not USER_RE.fullmatch(user) or user == "root":
        raise FenceError(f"not a system user's name: {user!r}")
    try:
        address = ipaddress.IPv4Address(to_address)
    except ValueError:
        raise FenceError(f"not an IPv4 address: {to_address!r}") from None
    if not address.is_loopback:
        raise FenceError(f"the proxy must listen on loopback, not {to_address}")
    if isinstance(to_port, bool) or not isinstance(to_port, int) or not 0 < to_port < 65536:
        raise FenceError(f"not a port: {to_port!r}")
    return ["iptables", "-w", "-t", "nat", action.value, "OUTPUT", "-p", "tcp",
            "-d", f"{METADATA_ADDRESS}/32", "--dport", str(METADATA_PORT),
            "-m", "owner", "!", "--uid-owner", user,
            "-m", "owner", "!", "--uid-owner", "0",
            "-j", "DNAT", "--to-destination", f"{address}:{to_port}"]


def refused(method: str, path: str) -> bool:
    """Whether the proxy refuses a request: a role's credentials under any version, a
    path it cannot read plainly (``..``, ``//``, an escape, a query: the metadata would
    read it another way than this check), or a method IMDSv2 does not take."""
    if method not in ("GET", "PUT") or not PATH_RE.fullmatch(path):
        return True
    parts = path.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", ".."):
        return True
    if method == "PUT":
        return parts != ["latest", "api", "token"]
    under = tuple(p.lower() for p in parts[1:])
    return any(under[:len(prefix)] == prefix for prefix in SECRET_PREFIXES)
