"""A job that has ended but is still stopping somewhere (a server that takes its grace
to die after a worker failed, a `clusterkit stop` under way): `train` waits for it,
bounded, instead of refusing to start next to it (issue 36)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.node.jobstate import JobState, JobStateName

# Seconds a stopping job is waited for: a node's stop is TERM, the job's grace (10 s by
# default), then KILL; the master's, every node's done or that grace and 3 s more.
STOP_WAIT = 60.0


def stopping(by_node: Mapping[str, Sequence[JobState]], master: str,
             job_ids: Sequence[str]) -> bool:
    """PURE. Whether every job of ``job_ids`` has been decided (its state on the master,
    label ``master``, is final) or is stopping wherever it is still active."""
    def ending(job_id: str) -> bool:
        decided = jobs.job_on(by_node.get(master, []), job_id)
        if decided is not None and decided.state.final:
            return True
        states = [j.state for js in by_node.values() for j in js if j.job_id == job_id]
        return all(s is JobStateName.STOPPING for s in states if s.active)

    return bool(job_ids) and all(ending(j) for j in job_ids)


def where_active(jc: JobCluster, by_node: Mapping[str, Sequence[JobState]]) -> list[str]:
    """The nodes (``master``, ``worker-2``) where a job is active."""
    return [jc.short(label) for label, js in by_node.items() if any(j.state.active for j in js)]


def wait_ended(rt: Runtime, jc: JobCluster, by_node: Mapping[str, Sequence[JobState]],
               job_ids: Sequence[str]) -> None:
    """Until no node has ``job_ids`` active any more (they are stopping), at most
    ``STOP_WAIT`` seconds; ClusterkitError (exit 1) naming the nodes after that."""
    named = ", ".join(job_ids)
    rt.started(Stage.TRAIN, f"job {named} ended but is still stopping on "
               f"{', '.join(where_active(jc, by_node))}: waiting for it (at most "
               f"{STOP_WAIT:.0f} s)")

    def probe() -> tuple[bool, dict[str, list[JobState]]]:
        now = jobs.node_jobs(jc)
        return not set(job_ids) & set(jobs.active_jobs(now)), now

    rt.wait_until(probe, deadline=rt.clock() + STOP_WAIT, first=0.25, late=lambda now: (
        ClusterkitError(f"job {named} is still stopping on {', '.join(where_active(jc, now))} "
                        f"of cluster {jc.name} after {STOP_WAIT:.0f} s",
                        f"`clusterkit stop {jc.name}` kills what is left of it, then run "
                        "`clusterkit train` again")))
    rt.done(Stage.TRAIN, f"job {named} has stopped on every node")
