"""Per-cluster known-hosts file: host keys recorded on first contact (the SSH probe of
`up`), so reaching a node never needs ``StrictHostKeyChecking=no``.

Lives at ``$CLUSTERKIT_HOME/clusters/<name>/known_hosts`` (default ``~/.clusterkit``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "CLUSTERKIT_HOME"


def cluster_dir(cluster: str) -> Path:
    home = Path(os.environ.get(HOME_ENV) or "~/.clusterkit").expanduser()
    return home / "clusters" / cluster


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


def record(cluster: str, keys_by_address: Mapping[str, str], port: int = 22) -> Path:
    """Merge ``address -> "type base64"`` into the cluster's known_hosts; return its path.
    A node that comes back at the same address with a new key replaces the old line."""
    path = known_hosts_path(cluster)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entries = _read(path)
    for address, key in keys_by_address.items():
        entries[host_entry(address, port)] = key
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{host} {key}\n" for host, key in sorted(entries.items())))
    os.replace(tmp, path)
    return path


def forget(cluster: str) -> None:
    """Drop everything recorded for a cluster (after `down`)."""
    shutil.rmtree(cluster_dir(cluster), ignore_errors=True)
