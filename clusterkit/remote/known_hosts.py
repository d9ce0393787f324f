"""Per-cluster known-hosts file: host keys recorded on first contact (the SSH probe of
`up`), so reaching a node never needs ``StrictHostKeyChecking=no``.

Lives at ``$CLUSTERKIT_HOME/clusters/<name>/known_hosts`` (default ``~/.clusterkit``).
Every change reads, merges and writes under an exclusive ``flock`` on ``.host_keys.lock``
beside the files (two runs at once each add their keys, neither loses the other's), and
every line is checked first: an address and a ``type base64`` key, nothing that
known_hosts would read as a second line, a wildcard or a marker (``@cert-authority``).
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clusterkit import statedir
from clusterkit.errors import ClusterkitError, RemoteError
from clusterkit.spec.keys import bad_char

HOME_ENV = statedir.HOME_ENV
LOCK_FILE = ".host_keys.lock"
_KEY_RE = re.compile(r"[a-z][a-z0-9@.-]{0,63} [A-Za-z0-9+/]+={0,3}")
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")
_INSTANCE_RE = re.compile(r"[A-Za-z0-9-]{1,64}")


def cluster_dir(cluster: str) -> Path:
    """The cluster's state directory, through statedir's name and containment checks."""
    return statedir.cluster_dir(cluster)


def known_hosts_path(cluster: str) -> Path:
    return cluster_dir(cluster) / "known_hosts"


def _read(path: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            host, _, key = line.partition(" ")
            if host and key:
                entries[host] = key
    return entries


def host_entry(address: str, port: int = 22) -> str:
    """How known_hosts names ``address:port`` (OpenSSH's ``[address]:port`` off port 22)."""
    return address if port == 22 else f"[{address}]:{port}"


def recorded_key(cluster: str, address: str, port: int = 22) -> str | None:
    """The host key recorded for ``address:port`` in the cluster's file, if any."""
    return _read(known_hosts_path(cluster)).get(host_entry(address, port))


@contextmanager
def _locked(cluster: str) -> Iterator[Path]:
    """The cluster's directory (made private), held under an exclusive lock."""
    folder = statedir.ensure_cluster_dir(cluster)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        os.close(fd)  # releases the lock


def _refuse(what: str, value: object, why: str) -> ClusterkitError:
    return ClusterkitError(f"refusing to write {what} {value!r} into a host-key file: {why}",
                           "a host key is `TYPE BASE64` from the node and an address is an "
                           "IP address or host name; nothing else is written there")


def check_key(key: str) -> str:
    """``key``'s ``type base64`` (a comment after them dropped) when it is one key on one
    line; else ClusterkitError."""
    bad = bad_char(key)
    if bad is not None:
        raise _refuse("the key", key, f"it contains {bad[1]}")
    if not _KEY_RE.fullmatch(_blob(key)):
        raise _refuse("the key", key, "it is not `TYPE BASE64`")
    return _blob(key)


def check_host(address: str, port: int) -> str:
    """``address``'s known_hosts entry when it is an IP address or host name (no
    wildcard, no marker, no space) and ``port`` a port; else ClusterkitError."""
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise _refuse("the port", port, "not a port number")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        if not _HOSTNAME_RE.fullmatch(address):
            raise _refuse("the address", address, "not an IP address or host name") from None
    return host_entry(address, port)


def record(cluster: str, keys_by_address: Mapping[str, str], port: int = 22) -> Path:
    """Merge ``address -> "type base64"`` into the cluster's known_hosts; return its path.
    A node that comes back at the same address with a new key replaces the old line."""
    lines = {check_host(a, port): check_key(k) for a, k in keys_by_address.items()}
    with _locked(cluster):
        return _merge_known_hosts(cluster, lines)


def _merge_known_hosts(cluster: str, lines: Mapping[str, str]) -> Path:
    path = known_hosts_path(cluster)
    entries = {**_read(path), **lines}
    statedir.write_private(path, "".join(f"{host} {key}\n"
                                         for host, key in sorted(entries.items())))
    return path


def forget(cluster: str) -> None:
    """Drop everything recorded for a cluster (after `down`); refuses a bad name or a
    directory that resolves outside the state directory (statedir.cluster_dir)."""
    statedir.remove_cluster_dir(cluster)


# Host keys per instance id: the truth the known_hosts file above is made from. An
# address can change (a stopped node starts with a new public IP) or be reused by
# another instance; an instance id is never reused, so a new key for the same id is
# refused until the user accepts it for that node.
HOST_KEYS_FILE = "host_keys.json"
ACCEPT_FLAG = "--accept-new-host-key"


def host_keys_path(cluster: str) -> Path:
    return cluster_dir(cluster) / HOST_KEYS_FILE


def instance_keys(cluster: str) -> dict[str, str]:
    """{instance id: "type base64"} recorded for the cluster ({} when none)."""
    try:
        data = json.loads(host_keys_path(cluster).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def fingerprint(key: str) -> str:
    """OpenSSH's ``SHA256:…`` fingerprint of a ``type base64`` key line."""
    try:
        blob = base64.b64decode(key.split()[1], validate=True)
    except (IndexError, binascii.Error):
        return "SHA256:?"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class KeyChange:
    """The same instance presenting a key other than the one recorded for it."""

    label: str  # the node, as the user names it
    instance_id: str
    recorded: str
    presented: str

    def describe(self) -> str:
        return (f"{self.label} ({self.instance_id}): recorded {fingerprint(self.recorded)}, "
                f"now presents {fingerprint(self.presented)}")


def changes(cluster: str, presented: Mapping[str, str],
            labels: Mapping[str, str] | None = None) -> list[KeyChange]:
    """The instances in ``presented`` ({instance id: key}) whose recorded key differs."""
    recorded = instance_keys(cluster)
    labels = labels or {}
    return [KeyChange(labels.get(iid, iid), iid, recorded[iid], key)
            for iid, key in sorted(presented.items())
            if recorded.get(iid) and _blob(recorded[iid]) != _blob(key)]


def _blob(key: str) -> str:
    return " ".join(key.split()[:2])


def changed_error(found: Sequence[KeyChange]) -> RemoteError:
    """Refusal for changed host keys: both fingerprints, and how to accept one node's."""
    nodes = " ".join(f"{ACCEPT_FLAG} {c.label}" for c in found)
    return RemoteError(
        "host key changed for the same instance, refusing to connect: "
        + "; ".join(c.describe() for c in found),
        "an instance keeps its host key for life: a new one means its disk was rebuilt or "
        "something intercepts the connection. Only if you know why, accept the new key "
        f"for that node alone: repeat the command with `{nodes}`")


def record_instances(cluster: str, keys: Mapping[str, str]) -> Path:
    """Merge {instance id: key} into the cluster's host_keys.json (atomic write, under
    the cluster's lock)."""
    new = {}
    for iid, key in keys.items():
        if not _INSTANCE_RE.fullmatch(iid):
            raise _refuse("the instance id", iid, "not an instance id")
        new[iid] = check_key(key)
    with _locked(cluster):
        path = host_keys_path(cluster)
        merged = {**instance_keys(cluster), **new}
        statedir.write_private(path, json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
        return path


def sync(cluster: str, addresses: Mapping[str, str], port: int = 22) -> Path | None:
    """Write the known_hosts lines of ``addresses`` ({address: instance id}) from the
    per-instance keys, so each address is checked against its instance's own key."""
    with _locked(cluster):
        keys = instance_keys(cluster)
        lines = {check_host(a, port): check_key(keys[iid])
                 for a, iid in addresses.items() if iid in keys}
        return _merge_known_hosts(cluster, lines) if lines else None
