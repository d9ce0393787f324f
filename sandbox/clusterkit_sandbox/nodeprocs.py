"""A sandbox node's processes, seen from this machine: found by namespace, signalled,
stopped.

A node boots as ``unshare --mount --pid --fork --kill-child ...`` (``node.start``): the
``unshare`` process (the agent's child, the node record's ``pid``) sits in the node's
mount namespace and this machine's PID namespace; its one child is the node's init (its
PID 1: the boot script, then sshd by ``exec``), and everything started in the node (SSH
sessions, detached jobs, their children) lives in the node's PID namespace (the record's
``pidns``, ``/proc/<pid>/ns/pid_for_children`` of the ``unshare`` process) and, unless
it made one of its own, its mount namespace (``mntns``). From here every one of them has
a pid of this machine's, in this machine's ``/proc``; inside the node they have only
their node's pids. Killing a namespace's init kills every process in it and in the PID
namespaces below it (the kernel's rule), and ``--kill-child`` kills the init when the
``unshare`` process dies: so no process of a node outlives its stop, even one that left
the node's mount namespace or made a PID namespace of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def mount_ns(pid: int) -> str | None:
    """``mnt:[inode]`` of ``pid``'s mount namespace (None: gone or not ours to read)."""
    return _ns(pid, "mnt")


def pid_ns(pid: int, children: bool = False) -> str | None:
    """``pid:[inode]`` of ``pid``'s PID namespace, or (``children``) of the one its
    children are born in (``unshare --pid``'s: the node's)."""
    return _ns(pid, "pid_for_children" if children else "pid")


def _ns(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def pids_in_ns(ns: str) -> list[int]:
    """Every process (but this one) in the namespace ``ns``: a mount namespace
    (``mnt:[...]``) or a PID namespace (``pid:[...]``), as ``mount_ns`` / ``pid_ns`` name
    them: all of a node's processes, including jobs detached from their SSH session."""
    kind = ns.split(":", 1)[0]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and _ns(int(entry), kind) == ns \
                and _alive(int(entry)):  # a zombie is no process to signal
            found.append(int(entry))
    return found


def own(ns: str | None) -> bool:
    """Whether ``ns`` is one of this process's own namespaces (a node without namespaces
    shares them: never signal "every process in it")."""
    return ns is not None and ns in (mount_ns(os.getpid()), pid_ns(os.getpid()))


def node_pids(pid: int | None, mntns: str | None, pidns: str | None) -> list[int]:
    """A node's processes here: its ``unshare`` process, and every process in its PID
    or mount namespace (none of this machine's own namespaces is counted)."""
    found = {pid} if pid else set()
    for ns in (mntns, pidns):
        if ns and not own(ns):
            found.update(pids_in_ns(ns))
    return sorted(found)


def inits(pids: list[int]) -> list[int]:
    """Of ``pids``, the inits of their PID namespaces (pid 1 inside, ``NSpid: N 1``)."""
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:") and len(line.split()) > 2 \
                        and line.split()[-1] == "1":
                    found.append(pid)
    return found


def kill_all(pids: list[int], grace: float = 1.0) -> None:
    """SIGTERM, up to ``grace`` seconds for them to end, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.02)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop(pid: int | None, mntns: str | None, pidns: str | None = None) -> None:
    """Stop the node as an OS stops: its processes get SIGTERM and a moment to end, then
    its init and ``unshare`` process go (whatever is left dies with the init)."""
    victims = node_pids(pid, mntns, pidns)
    last = {p for p in victims if p == pid} | set(inits(victims))
    kill_all([p for p in victims if p not in last])
    kill_all(sorted(last))
    if pid:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
