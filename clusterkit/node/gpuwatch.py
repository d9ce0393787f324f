"""This node's GPU health, read where its job runs: stdlib only, Python >= 3.8.

``read_health`` reads ``nvidia-smi -q`` and the kernel log's GPU lines (dmesg, else
``sudo -n dmesg``, else ``journalctl -k``); the observer answers `top` with it. The
daemon's ``HealthWatch`` reads it every ``sampling.health_every`` s while the job runs
(job.json; 0: never) and judges it with ``gpuhealth.problems``: a problem that a GPU
reset does not clear (a fatal Xid such as 79 "fallen off the bus", a GPU missing from
nvidia-smi, uncorrectable ECC errors, a failed row remap) makes the node unfit, once. The
daemon reports that like a spot interruption notice: the job checkpoints and stops, and
with ``train.max_recoveries`` the node is replaced like a reclaimed one.

A GPU fallen off the bus can leave ``nvidia-smi`` hung in D state, unkillable: a command
is never waited on past its timeout, and while one hangs it is not started again.
"""

from __future__ import annotations

import subprocess

try:  # imported as clusterkit.node.gpuwatch
    from .gpuhealth import problems
except ImportError:  # a file beside gpuhealth.py on a node (or both in the prelude)
    from gpuhealth import problems

SMI_Q = ["nvidia-smi", "-q"]
KERNEL_LOGS = (["dmesg"], ["sudo", "-n", "dmesg"],
               ["journalctl", "-k", "-q", "--no-pager", "-n", "20000"])
GPU_LINE = ("NVRM", "Xid", "fallen off the bus")
KEEP_LINES = 200  # the newest GPU lines of the kernel log kept
TIMEOUT = 15.0  # seconds: `nvidia-smi -q` of 8 GPUs takes one or two
HEALTH_EVERY = 60.0  # seconds, job.json's default: `nvidia-smi -q` costs ~1 s of CPU


class Reader:
    """Runs a command for its output, never waiting on one that hangs."""

    def __init__(self, timeout: float = TIMEOUT):
        self.timeout = timeout
        self.stuck = {}  # argv[0] -> the hung process

    def output(self, argv: list) -> str | None:
        """Its stdout when it exits 0 in time; None otherwise (missing, failed, hung)."""
        hung = self.stuck.get(argv[0])
        if hung is not None and hung.poll() is None:
            return None
        self.stuck.pop(argv[0], None)
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        except OSError:
            return None
        try:
            out, _ = p.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.stdout.close()
            self.stuck[argv[0]] = p
            return None
        return out.decode("utf-8", "replace") if p.returncode == 0 else None


def kernel_gpu_lines(reader: Reader) -> str | None:
    """The kernel log's GPU lines (the newest KEEP_LINES), from the first source that
    answers; None when none does."""
    for argv in KERNEL_LOGS:
        text = reader.output(argv)
        if text is not None:
            lines = [line for line in text.splitlines() if any(w in line for w in GPU_LINE)]
            return "\n".join(lines[-KEEP_LINES:])
    return None


def read_health(reader: Reader | None = None) -> dict:
    """{"smi_q": `nvidia-smi -q` (None without one), "kernel_log": its GPU lines}."""
    reader = reader or Reader()
    return {"smi_q": reader.output(SMI_Q), "kernel_log": kernel_gpu_lines(reader)}


class HealthWatch:
    """Every ``every`` s, this node's GPUs judged; ``check`` returns the problems that
    make the node unfit the first time there are any, then nothing more."""

    def __init__(self, expected_gpus: int, every: float = HEALTH_EVERY, reader=None,
                 started: float | None = None):
        self.expected, self.every = int(expected_gpus), float(every)
        self.read = reader or (lambda: read_health())
        self.last = started  # when it last read (the job's start: first read ``every`` in)
        self.told = False

    def due(self, now: float, saw_gpus: bool) -> bool:
        """Time to read: a GPU node (by its type, or nvidia-smi answered), never told."""
        if self.told or self.every <= 0 or not (self.expected or saw_gpus):
            return False
        return self.last is None or now - self.last >= self.every

    def check(self, now: float, gpu_count: int | None) -> list:
        """The problems no GPU reset clears, as (evidence, meaning), when it is time and
        there are any; [] otherwise. ``gpu_count``: GPUs nvidia-smi last listed."""
        if not self.due(now, bool(gpu_count)):
            return []
        self.last = now
        health = self.read()
        found = problems(health.get("kernel_log") or "", health.get("smi_q") or "",
                         gpu_count, self.expected)
        fatal = [(evidence, meaning) for evidence, meaning, reset_only in found
                 if not reset_only]
        self.told = bool(fatal)
        return fatal


def unfit_reason(fatal: list) -> str:
    """One line: every piece of evidence, and each meaning once."""
    meanings = []
    for _evidence, meaning in fatal:
        if meaning not in meanings:
            meanings.append(meaning)
    return "; ".join(e for e, _m in fatal) + " (" + "; ".join(meanings) + ")"
