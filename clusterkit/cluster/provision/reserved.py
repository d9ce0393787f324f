"""`up` and `plan` on a capacity reservation: read it where the spec allows (no offer
search: it decides type and AZ), refuse before any launch what it cannot hold
(plan.reservation says why), and wait for a Capacity Block that has not started, with
nothing made meanwhile, so Ctrl-C leaves nothing behind.

The wait is on the date (``Runtime.wall``), not scaled by a timed sandbox's timescale:
a block starts at a time on AWS's clock, not after a wait AWS takes."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws.reservations import describe_reservation
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, ClusterkitError, SpecError, SpecIssue
from clusterkit.events import Stage
from clusterkit.plan.reservation import KEY, Reservation, refusal, span, utc
from clusterkit.plan.up import UpPlan
from clusterkit.spec.model import Spec

COUNTDOWN = 600.0  # seconds between two countdown lines: alive, yet a short log overnight
# EC2 makes a block active at its start; a few minutes' lag is waited out, no more.
ACTIVE_WAIT = 900.0


def read(rt: Runtime, spec: Spec, regions: Sequence[str]) -> Reservation:
    """The spec's reservation, from the first of ``regions`` that has it; a located
    SpecError (exit 2) when none has."""
    rid = spec.nodes.reservation_id
    assert rid is not None, "a spec naming one reservation"
    for region in regions:
        found = describe_reservation(rt.session, region, rid, rt.wall())
        if found is not None:
            return found
    loc = spec.where(KEY)
    raise SpecError([SpecIssue(
        loc.file, loc.line, loc.col, KEY, f"no capacity reservation {rid} in "
        f"{', '.join(regions)} (the spec's regions where its pinned resources are)",
        "check the id and the spec's region: a reservation serves its own region only "
        "(`aws ec2 describe-capacity-reservations --region R` lists them)")])


def _waits(plan: UpPlan) -> Reservation | None:
    held = plan.reservation
    return held if held is not None and held.waits and plan.nodes.launch else None


def refuse(plan: UpPlan, *, wait: bool = True) -> None:
    """Before `up` asks: the plan's refusal (SpecError, exit 2); a block that has not
    started under ``wait`` False (`up --no-wait`: exit 1 with its start time)."""
    if plan.refusal is not None:
        raise SpecError([plan.refusal], "`clusterkit plan SPEC` shows the reservation; "
                        "nothing was changed")
    held = _waits(plan)
    if held is None or wait:
        return
    raise ClusterkitError(
        f"{held.label} starts at {utc(held.start)} (in "
        f"{span((held.start or held.read_at) - held.read_at)}): nothing was changed",
        f"run `clusterkit up` again after {utc(held.start)}, or without --no-wait to wait "
        "for it")


def _countdown(rt: Runtime, held: Reservation) -> None:
    start = held.start or rt.wall()
    rt.info(f"{held.label} starts at {utc(start)}: waiting {span(start - rt.wall())} "
            "(Ctrl-C stops the wait; nothing is made before the start)", stage=Stage.LAUNCH)
    while (left := start - rt.wall()) > 0:
        rt.sleep(min(left, COUNTDOWN))
        left = start - rt.wall()
        if left > 0:
            rt.info(f"{held.label} starts in {span(left)}", stage=Stage.LAUNCH)


def wait_for_start(rt: Runtime, spec: Spec, plan: UpPlan) -> bool:
    """Wait until the plan's block has started and EC2 says it is active, then check it
    again as the plan did (SpecError if it cannot hold the nodes now). False at once
    when there is nothing to wait for."""
    held = _waits(plan)
    if held is None:
        return False
    _countdown(rt, held)

    def probe() -> tuple[bool, Reservation | None]:
        now = describe_reservation(rt.session, held.region, held.reservation_id, rt.wall())
        return now is None or not now.waits, now

    fresh = rt.wait_until(probe, deadline=rt.clock() + ACTIVE_WAIT, late=lambda seen: AwsError(
        f"{held.label} is still {seen.state if seen else 'unknown'} after its start",
        "run `clusterkit up` again in a few minutes; nothing was made",
        resource=held.reservation_id))
    if fresh is None:
        raise AwsError(f"{held.label} is gone (EC2 no longer describes it)", "nothing was "
                       "made; check the reservation", resource=held.reservation_id)
    issue = refusal(spec, fresh, len(plan.nodes.launch), plan.existing)
    if issue is not None:
        raise SpecError([issue], "it changed while `up` waited; nothing was made")
    rt.info(f"{held.label} is {fresh.state}: {fresh.available} of {fresh.total} available",
            stage=Stage.LAUNCH)
    return True
