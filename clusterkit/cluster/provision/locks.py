"""One `up` or `down` of a cluster at a time on this machine: a lock file per cluster in
``<state>/locks/`` (outside the cluster's own directory, which `down` removes), held with
``flock`` for the whole command, so a second terminal is told at once instead of racing
the first (two `up`s would both create the stack; one would then hint at a `down` that
deletes what the other made). Another machine's `up` shows as the stack in progress."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from clusterkit import statedir
from clusterkit.errors import ClusterBusyError


@contextlib.contextmanager
def cluster_lock(cluster: str, command: str) -> Iterator[None]:
    """Hold the cluster's lock while ``command`` (up, down) runs; ClusterkitError (exit 1)
    naming the command and process that hold it, when another does (ClusterBusyError)."""
    statedir.check_name(cluster)
    folder = statedir.private_dir(statedir.state_dir() / "locks")
    fd = os.open(folder / f"{cluster}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another command"
            raise ClusterBusyError(
                f"cluster {cluster} is busy: {holder} is in progress on this machine",
                "wait for it to end (`clusterkit status "
                f"{cluster}` shows the nodes meanwhile), then run `clusterkit {command}` "
                "again; nothing was changed") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"`clusterkit {command}` (pid {os.getpid()})".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock
