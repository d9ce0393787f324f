"""Whether a job hangs on this node: no progress line in its logs and its GPUs idle
(without GPUs: its processes using next to no CPU) for ``stall_after`` seconds while the
processes live. The supervisor feeds it every metric sample (``sampler.py``) and, on a
stall, gives the job's processes the checkpoint signal (and with ``stop_on_stall``
stops the job once the grace is over), so a hung run stops billing. Stdlib only,
Python >= 3.8, no I/O: shipped beside the supervisor."""

from __future__ import annotations

IDLE_UTIL = 5.0  # % on the busiest GPU: below it, nothing computes
IDLE_CPU = 0.05  # cores of the job's processes, for a node without GPUs


def idle(sample: dict) -> bool | None:
    """Whether the sample shows the job doing nothing; None when it cannot say."""
    gpus = sample.get("gpus")
    if gpus:
        utils = [float(g["util"]) for g in gpus if g.get("util") is not None]
        return max(utils) < IDLE_UTIL if utils else None
    cpu = sample.get("job_cpu")
    return None if cpu is None else float(cpu) < IDLE_CPU


class StallWatch:
    def __init__(self, stall_after: float, started: float):
        self.stall_after = float(stall_after)
        self.started = float(started)
        self.idle_since = None  # epoch: the first of the idle samples in a row
        self.stalled_at = None  # epoch: when it was found (once)

    def update(self, sample: dict) -> bool:
        """True once: the sample that makes the job stalled."""
        now = float(sample["t"])
        quiet = idle(sample)
        if quiet is None:
            return False
        if not quiet:
            self.idle_since = None
            return False
        if self.idle_since is None:
            self.idle_since = now - float(sample.get("dt") or 0.0)
        progress = max(float(sample.get("progress_at") or 0.0), self.started)
        quiet_for = now - max(progress, self.idle_since)
        if self.stalled_at is None and quiet_for >= self.stall_after:
            self.stalled_at = now
            return True
        return False

    def reason(self, node: int) -> str:
        return (f"stalled on node {node}: no progress line and the job idle for "
                f"{self.stall_after:g} s (train.stall_after) while its processes live")
