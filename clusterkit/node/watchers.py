"""What the supervisor watches while the job runs, behind one small interface: each
watch's ``poll(now)`` (epoch seconds) returns the events it saw since the last, and one
loop (the supervisor's) polls them all and decides. Stdlib only, Python >= 3.8;
shipped beside the supervisor (``bundle.SUPERVISOR``).

- ``InterruptionWatch``: the instance metadata's spot notices and a Capacity Block's end
  (``interruption.Watcher``), every ``interruption.POLL`` s;
- ``SamplerWatch``: a metrics sample (``sampler.Sampler``) every interval, the job's
  running totals (summary.json), and the stall watch fed from each sample (``stall``);
  a sampler that fails is said once and left off: metrics never take the job down;
- ``HealthWatch``: the node's GPUs every ``health_every`` s (``gpuwatch``): unfit ones
  become a notice of their own kind, so the job checkpoints and stops and the node is
  replaced like a reclaimed one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

try:  # imported as clusterkit.node.watchers (the client, tests)
    from . import gpuwatch, interruption
    from .interruption import Notice, NoticeKind
    from .jobfile import JobFile, Sampling
    from .samples import write_summary
    from .stall import StallWatch
    from .totals import Totals
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import gpuwatch
    import interruption
    from interruption import Notice, NoticeKind
    from jobfile import JobFile, Sampling
    from samples import write_summary
    from stall import StallWatch
    from totals import Totals



class EventKind(str, enum.Enum):
    NOTICE = "notice"  # a notice for state.json; an interruption or unfit GPUs stop the job
    STALL = "stall"  # the job hangs here: the checkpoint signal (and maybe a stop)
    SAID = "said"  # a line for supervisor.log, nothing to decide


@dataclass(frozen=True)
class Event:
    kind: EventKind
    text: str  # for supervisor.log (a stall: its reason)
    notice: Notice | None = None


def said(text: str) -> Event:
    return Event(EventKind.SAID, text)


class InterruptionWatch:
    """The instance metadata and the Capacity Block's end (``interruption.Watcher``)."""

    def __init__(self, watcher: interruption.Watcher):
        self.watcher = watcher
        self.said_unavailable: str | None = None

    def poll(self, now: float) -> list:
        events = [Event(EventKind.NOTICE, f"{n.kind.value} notice: {n.to_json()}", n)
                  for n in self.watcher.check()]
        if self.watcher.unavailable != self.said_unavailable:
            self.said_unavailable = self.watcher.unavailable
            events.append(said("interruption watcher: "
                               f"{self.said_unavailable or 'metadata readable again'}"))
        return events


class SamplerWatch:
    """A metrics sample each interval (``sampler``), added to the totals, fed to the
    stall watch (none: not watched)."""

    def __init__(self, sampler, job_dir: str, stall: StallWatch | None, node: int):
        self.sampler, self.job_dir, self.stall, self.node = sampler, job_dir, stall, node
        self.totals = Totals()
        self.gpus_seen: int | None = None  # GPUs in the newest sample that listed any
        self.failed = False

    def poll(self, now: float) -> list:
        if self.failed:
            return []
        try:
            written = self.sampler.step(now)
            if written is None:
                return []
            self.totals.add(written)
            self.gpus_seen = len(written["gpus"]) if written.get("gpus") else self.gpus_seen
            write_summary(self.job_dir, self.totals)
            if self.stall is not None and self.stall.update(written):
                return [Event(EventKind.STALL, self.stall.reason(self.node))]
        except Exception as error:  # noqa: BLE001 (any: the job goes on without metrics)
            self.failed = True
            return [said(f"metrics sampler stopped: {error!r}")]
        return []


class HealthWatch:
    """This node's GPUs (``gpuwatch.HealthWatch``), told how many GPUs the newest sample
    listed (``gpus_seen``: a callable)."""

    def __init__(self, watch: gpuwatch.HealthWatch, gpus_seen):
        self.watch, self.gpus_seen = watch, gpus_seen

    def poll(self, now: float) -> list:
        fatal = self.watch.check(now, self.gpus_seen())
        if not fatal:
            return []
        notice = Notice(NoticeKind.UNFIT, now, "replace", gpuwatch.unfit_reason(fatal))
        return [Event(EventKind.NOTICE, f"GPUs unfit: {notice.reason}", notice)]


def watches_of(job: JobFile, job_dir: str, started: float, sampler=None) -> list:
    """Every watch job.json asks for, in the order they are polled: the interruption
    watch (metadata or a Capacity Block's end), the sampler (given: made from the
    running processes) with its stall watch, the GPU health watch."""
    found: list = []
    watcher = interruption.watcher_of({"imds": job.imds, "block_end": job.block_end})
    if watcher is not None:
        found.append(InterruptionWatch(watcher))
    conf = job.sampling or Sampling()
    samples = None
    if sampler is not None:
        stall = StallWatch(conf.stall_after, started) if conf.stall_after else None
        samples = SamplerWatch(sampler, job_dir, stall, job.node_index)
        found.append(samples)
    if conf.health_every:
        health = gpuwatch.HealthWatch(conf.gpus, conf.health_every, started=started)
        found.append(HealthWatch(health, lambda: samples.gpus_seen if samples else None))
    return found
