"""Where a job's processes live on a node and how they end: stdlib only, Python >= 3.8.

Shipped beside ``supervisor.py`` into every job dir (which imports it from there). A job
gets a cgroup of its own: a systemd scope where systemd runs the node, else a directory
under the cgroup v2 mount. ``Reaper`` finds what is left of the job (the cgroup's
members; without a cgroup, its process groups and every process whose environment holds
``CLUSTERKIT_JOB_ID=<id>``) and signals or kills it, escaped ``setsid`` children too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time


def cgroup2_mount(mountinfo: str) -> str | None:
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            return left.split()[4]
    return None


class Cgroup:
    def __init__(self, path: str, unit: str | None = None, holder: int | None = None):
        self.path, self.unit, self.holder = path, unit, holder
        self.procs_file = os.path.join(path, "cgroup.procs")

    def pids(self) -> set:
        try:
            with open(self.procs_file) as f:
                return {int(x) for x in f.read().split()} - {self.holder}
        except OSError:
            return set()

    def kill(self) -> None:
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:  # kernels before 5.14: one by one
            for pid in self.pids():
                signal_pid(pid, signal.SIGKILL)

    def remove(self) -> None:
        if self.unit:
            subprocess.call(["systemctl", "stop", self.unit], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        for _ in range(20):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


def _systemd_scope(name: str, mount: str) -> Cgroup | None:
    """A scope unit held open by a sleeper, so systemd owns the group and cleans it."""
    unit = f"ck-{name}.scope"
    holder = subprocess.Popen(
        ["systemd-run", "--scope", "--quiet", "--collect", "-p", "Delegate=yes",
         "--unit", unit, "sleep", "infinity"], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(50):
        try:
            with open(f"/proc/{holder.pid}/cgroup") as f:
                rel = [x[3:] for x in f.read().splitlines() if x.startswith("0::")][0]
        except (OSError, IndexError):
            rel = ""
        if rel.endswith("/" + unit):
            return Cgroup(mount + rel, unit, holder.pid)
        if holder.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def make_cgroup(name: str) -> Cgroup | None:
    if os.environ.get("CLUSTERKIT_NO_CGROUP") == "1":
        return None
    try:
        with open("/proc/self/mountinfo") as f:
            mount = cgroup2_mount(f.read())
        if mount is None:
            return None
        with open("/proc/1/comm") as f:
            systemd = f.read().strip() == "systemd"
        if systemd and shutil.which("systemd-run"):
            return _systemd_scope(name, mount)
        path = os.path.join(mount, "clusterkit", name)
        os.makedirs(path, exist_ok=True)
        group = Cgroup(path)
        with open(group.procs_file):
            return group
    except OSError:
        return None


def pid_alive(pid: object) -> bool:
    """Whether a process with this pid exists and is not a zombie (another user's
    counts); anything but a positive int is no process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_pid(pid: int, sig: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, sig)


def scan_proc(pgids: set, job_id: str, node: int | None = None) -> set:
    """Live pids in one of ``pgids`` or whose environ holds CLUSTERKIT_JOB_ID=job_id
    (and, given ``node``, CLUSTERKIT_NODE_RANK=node: where several nodes share one PID
    space, the sandbox's, one node's sweep must not reach another's processes)."""
    markers = {("CLUSTERKIT_JOB_ID=" + job_id).encode()}
    if node is not None:
        markers.add(f"CLUSTERKIT_NODE_RANK={node}".encode())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            if int(fields[2]) in pgids:
                found.add(int(entry))
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if markers <= set(f.read().split(b"\0")):
                    found.add(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


class Reaper:
    """Who is left of the job on this node, and how to end them."""

    def __init__(self, job_id: str, cgroup: Cgroup | None, pgids: set,
                 node: int | None = None):
        self.job_id, self.cgroup, self.pgids, self.node = job_id, cgroup, set(pgids), node

    def alive(self) -> set:
        if self.cgroup is not None and os.path.isdir(self.cgroup.path):
            return self.cgroup.pids()
        return scan_proc(self.pgids, self.job_id, self.node)

    def signal(self, sig: int) -> None:
        """``sig`` to every process of the job here, once each (a checkpoint signal
        must not come twice): its process groups, then each one that left them."""
        for pgid in self.pgids:
            signal_pid(pgid, sig, group=True)
        for pid in self.alive():
            if _pgid(pid) not in self.pgids:  # escaped its process group (setsid)
                signal_pid(pid, sig)

    def signal_but(self, sig: int, spared: set, spared_groups: frozenset = frozenset(),
                   ) -> None:
        """``sig`` to every process of the job here but the ``spared`` ones and those in
        the ``spared_groups`` process groups, once each (the checkpoint signal: a
        launcher such as torchrun's agent, MXNet's scheduler and servers would die of
        it; the workers save)."""
        for pid in self.alive():
            if pid not in spared and _pgid(pid) not in spared_groups:
                signal_pid(pid, sig)

    def kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill()
        self.signal(signal.SIGKILL)


def recorded_cgroup(state: dict, name: str) -> Cgroup | None:
    """The group state.json names, only if it is this job's (never kill another group)."""
    path, unit = str(state.get("cgroup") or ""), state.get("cgroup_unit")
    if unit is not None and unit != f"ck-{name}.scope":
        return None
    ends = ("/" + unit,) if unit else ("/clusterkit/" + name,)
    return Cgroup(path, unit) if path.startswith("/") and path.endswith(ends) \
        and "/../" not in path else None
