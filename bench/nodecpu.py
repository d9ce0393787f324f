"""Where the CPU of a sandbox bench goes: the emulated nodes' own work, the sandbox's
AWS endpoint, and the client, so a bench can say how much of a wall time the emulation
alone needs on this machine.

In the sandbox every node is an sshd on this machine: its handshakes, fact gathering and
bootstrap scripts run on the same few cores as the client, where on AWS each node has
its own; the sandbox server does AWS's side (the API, booting nodes, loop-backed
volumes). Their CPU time over the cores of this machine is a floor under any wall time
of the command, however fast the client were.

Counted from /proc, children included (what a process reaped): a node's sessions and
everything they ran are reaped by its sshd listener; the loop devices and the AWS
endpoint by the sandbox server; the client is this process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
SERVER_MARK = b"clusterkit_sandbox.server"


@dataclass(frozen=True)
class Sample:
    """Each live process: pid -> (its start time, its group, its CPU seconds incl.
    reaped children)."""

    procs: dict[int, tuple[int, str, float]]


@dataclass(frozen=True)
class CpuSplit:
    nodes: float  # the emulated nodes: sshd listeners and all they reaped
    sandbox: float  # the sandbox server: moto (the AWS endpoint), loop devices
    client: float  # this process (and what it reaped)

    def floor(self, cores: int | None = None) -> float:
        """The wall time the emulation alone needs at least on ``cores`` cores: the
        nodes' own work and the sandbox's (AWS's side: the API, booting nodes, volumes),
        were the client free."""
        return (self.nodes + self.sandbox) / (cores or os.cpu_count() or 1)


def _group(pid: int, comm: str) -> str | None:
    if pid == os.getpid():
        return "client"
    if comm == "sshd":
        return "nodes"
    if comm.startswith("python"):
        try:
            if SERVER_MARK in Path(f"/proc/{pid}/cmdline").read_bytes():
                return "sandbox"
        except OSError:
            return None
    return None


def sample(settle: float = 0.0) -> Sample:
    """The processes now, after ``settle`` seconds: a child's CPU counts when it is
    reaped, so the sessions of what ran before must end first."""
    time.sleep(settle)
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        group = _group(int(entry), comm)
        if group is not None:  # utime stime cutime cstime; starttime tells pids apart
            cpu = sum(int(x) for x in fields[11:15]) / TICK
            procs[int(entry)] = (int(fields[19]), group, cpu)
    return Sample(procs)


def split(before: Sample, after: Sample) -> CpuSplit:
    """CPU seconds each group spent between the two samples."""
    spent = {"nodes": 0.0, "sandbox": 0.0, "client": 0.0}
    for pid, (start, group, cpu) in after.procs.items():
        old = before.procs.get(pid)
        spent[group] += cpu - (old[2] if old and old[0] == start else 0.0)
    return CpuSplit(**spent)


def table(rows: list[tuple[int, CpuSplit, float]], what: str) -> list[str]:
    """(nodes, CPU split, wall) per size -> the lines of a CPU table."""
    cores = os.cpu_count() or 1
    out = [f"{what}: CPU seconds spent, and the floor the emulation (nodes, sandbox) puts "
           f"under the wall on this machine's {cores} cores",
           f"{'nodes':>5} {'nodes cpu':>9} {'sandbox cpu':>11} {'client cpu':>10} "
           f"{'floor s':>7} {'wall s':>7}"]
    for nodes, cpu, wall in rows:
        out.append(f"{nodes:>5} {cpu.nodes:>9.2f} {cpu.sandbox:>11.2f} {cpu.client:>10.2f} "
                   f"{cpu.floor(cores):>7.2f} {wall:>7.2f}")
    return out


def out_of_reach(nodes: int, cpu: CpuSplit, base: float, goal: float, what: str) -> list[str]:
    """A line saying the goal cannot be met on this machine, when the emulation's floor
    alone is above it (none otherwise)."""
    floor = cpu.floor()
    if floor <= goal * base:
        return []
    return [f"on this machine the goal is out of reach: emulating {nodes} nodes (their own "
            f"work and AWS's side) needs at least {floor:.2f} s of wall on its "
            f"{os.cpu_count()} cores, {floor / base:.2f}x one node's whole {what}"]
