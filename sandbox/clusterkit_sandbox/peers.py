"""Who is on the other end of a loopback connection to the sandbox's endpoint: for its
instance metadata, which, as EC2's, is unsigned and reachable, on EC2, only from the
instance itself.

On this machine every process can reach the endpoint's port, so the metadata hands a
session token (without which it answers nothing, role credentials included) only to a
caller that is the instance's own or the sandbox's user: the connecting socket (found in
``/proc/net/tcp`` by its address and port) belongs to this daemon's uid (who can read the
sandbox's credentials file anyway), or is held by a process of the instance's node (its
mount namespace, as ``nodes.json`` records it). Another local user who found the port
gets 403 and no token."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterkit_sandbox.state import NODES_FILE, read_json_dict

TCP_TABLE = "/proc/net/tcp"


def _hex(address: str, port: int) -> str:
    """``/proc/net/tcp``'s form of an IPv4 address and port (the address as the kernel
    stores it, read as a little-endian word)."""
    return f"{socket.inet_aton(address)[::-1].hex().upper()}:{port:04X}"


def socket_of(client: tuple[str, int], server_port: int,
              table: str = TCP_TABLE) -> tuple[int, int] | None:
    """(uid, inode) of the client's socket of a connection from ``client`` to this
    machine's ``server_port``; None when the table shows none (gone, or not IPv4)."""
    try:
        local, remote_port = _hex(*client), f":{server_port:04X}"
        lines = Path(table).read_text().splitlines()[1:]
    except (OSError, ValueError):
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == local and fields[2].endswith(remote_port):
            return int(fields[7]), int(fields[9])
    return None


def holds(pid: int, inode: int) -> bool:
    """``pid`` has the socket ``inode`` open."""
    wanted = f"socket:[{inode}]"
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def caller_socket(environ: dict[str, Any]) -> tuple[int, int] | None:
    """(uid, inode) of the socket on the other end of a WSGI request (``socket_of``)."""
    try:
        client = (str(environ["REMOTE_ADDR"]), int(environ["REMOTE_PORT"]))
        server_port = int(environ["SERVER_PORT"])
    except (KeyError, ValueError):
        return None
    return socket_of(client, server_port)


def metadata_callers(state_dir: Path) -> Callable[[dict[str, Any], str], bool]:
    """The check the daemon's metadata makes of a token's caller (``Imds``): the
    sandbox's user, or a process of instance ``iid``'s node."""
    from clusterkit_sandbox import nodeprocs as nodes

    def allowed(environ: dict[str, Any], iid: str) -> bool:
        found = caller_socket(environ)
        if found is None:
            return False
        uid, inode = found
        if uid == os.geteuid():
            return True
        record = read_json_dict(state_dir / NODES_FILE).get(iid)
        ns = record.get("mntns") if isinstance(record, dict) else None
        if not ns or ns == nodes.mount_ns(os.getpid()):
            return False  # no node of its own: only the sandbox's user
        return any(holds(pid, inode) for pid in nodes.pids_in_ns(str(ns)))

    return allowed
