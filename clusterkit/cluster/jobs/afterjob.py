"""`train --down` and `train --down-always` (as SkyPilot's `sky launch --down`): once the
job has ended and its report is out, the cluster is taken down by `down` itself, with
its question (``yes`` skips it; no terminal and no ``yes`` is refused before the job
starts, by the CLI). ``--down`` takes it down after a job that succeeded only: a failed
or stopped job leaves it running to be looked at; ``--down-always`` after any end. A job
still running (detached, or left running at Ctrl-C) never takes its cluster down."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.provision.down import DownResult, do_down
from clusterkit.cluster.runtime import Runtime
from clusterkit.events import Stage


class DownWhen(str, Enum):
    NEVER = "never"
    SUCCESS = "success"  # --down
    ALWAYS = "always"  # --down-always


@dataclass(frozen=True)
class AfterJob:
    """Whether the job's end takes the cluster down, why, and what `down` deleted."""

    when: DownWhen
    down: bool
    reason: str
    result: DownResult | None = None

    def to_json(self) -> dict[str, Any]:
        return {"when": self.when.value, "down": self.down, "reason": self.reason,
                "result": self.result.to_json() if self.result else None}


def decide(outcome: JobOutcome, when: DownWhen) -> AfterJob:
    """PURE. Down or not after ``outcome``, with the reason to say."""
    cluster, job = outcome.cluster, f"job {outcome.job_id}"
    if when is DownWhen.NEVER:
        return AfterJob(when, False, "")
    if outcome.detached:
        return AfterJob(when, False, f"{job} still runs: cluster {cluster} is left up "
                        f"(`clusterkit down {cluster}` when it is done)")
    if outcome.ok:
        return AfterJob(when, True, f"{job} succeeded")
    if when is DownWhen.ALWAYS:
        return AfterJob(when, True, f"{job} {outcome.state.value} (--down-always)")
    return AfterJob(when, False, f"{job} {outcome.state.value}: cluster {cluster} is left "
                    f"up to look at (--down takes it down after a success only; "
                    f"--down-always after any end); `clusterkit down {cluster}` removes it")


def down_after(rt: Runtime, target: str, outcome: JobOutcome, when: DownWhen, *,
               yes: bool, confirm: Callable[[str], bool] | None, region: str | None = None,
               timeout: float = 1800.0) -> AfterJob:
    """``decide``, then `down` of ``target`` (the spec file or NAME `train` was given)
    when it says so; a declined question is `down`'s error (exit 1, nothing deleted)."""
    after = decide(outcome, when)
    if not after.down:
        if after.reason:
            rt.warn(after.reason, stage=Stage.DOWN)
        return after
    rt.info(f"{after.reason}: taking cluster {outcome.cluster} down "
            f"(--down{'-always' if when is DownWhen.ALWAYS else ''})", stage=Stage.DOWN)
    result = do_down(target, yes=yes, confirm=confirm, region=region, rt=rt, timeout=timeout)
    return AfterJob(when, True, after.reason, result)
