"""Create, update or delete the cluster's stack and wait, reporting stack events live."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.aws import stack as cfn
from clusterkit.cluster.provision.cfnrole import ENV, StackRole, stack_role
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, ClusterBusyError, CredentialsError
from clusterkit.events import Kind, Stage
from clusterkit.kinds import StackAction

OK = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "DELETE_COMPLETE"})
UNREAD = object()  # deploy's ``current`` when the caller has not read the stack
# deploy's ``early``: the stack's events so far -> what the caller needs, or None (not yet)
Early = Callable[[Sequence[Mapping[str, Any]]], "dict[str, str] | None"]


def _kind(status: str) -> Kind:
    """A failed or rolled-back resource is an error event, any other one progress."""
    return Kind.ERROR if status.endswith("FAILED") or "ROLLBACK" in status else Kind.PROGRESS


def wait_stack(rt: Runtime, region: str, stack_id: str, *, timeout: float,
               seen: set[str] | None = None) -> dict[str, Any]:
    """Poll until the stack leaves *_IN_PROGRESS; report each new stack event once. The
    stack as its last poll read it (aws.stack.stack_record: outputs and all). The status
    is read before the events: the poll that sees the stack done then reports every
    event up to its end (events first would miss those that came between the reads)."""
    return wait_ready(rt, region, stack_id, timeout=timeout, seen=seen)[0]


def wait_ready(rt: Runtime, region: str, stack_id: str, *, timeout: float,
               seen: set[str] | None = None, early: Early | None = None,
               ) -> tuple[dict[str, Any], dict[str, str] | None]:
    """wait_stack; with ``early``, it also ends while the stack is in progress once
    ``early(its events so far)`` gives something (returned beside the stack)."""
    seen = set() if seen is None else seen
    def probe() -> tuple[bool, tuple[dict[str, Any], dict[str, str] | None]]:
        record = cfn.stack_record(rt.session, region, stack_id)
        events = cfn.stack_events(rt.session, region, stack_id)
        for ev in events:
            if ev["id"] in seen:
                continue
            seen.add(ev["id"])
            reason = f"  {ev['reason']}" if ev["reason"] else ""
            rt.emit(_kind(ev["status"]), f"stack {ev['resource']:<26} {ev['status']}{reason}",
                    stage=Stage.STACK, level=1)
        if not record["status"].endswith("_IN_PROGRESS"):
            return True, (record, None)
        creating = record["status"] == "CREATE_IN_PROGRESS"  # not rolling back
        ready = early(events) if early is not None and creating else None
        return ready is not None, (record, ready)

    return rt.wait_until(probe, deadline=rt.clock() + timeout, late=lambda last: AwsError(
        f"stack {stack_id} still {last[0]['status']} after {timeout:.0f}s",
        "watch it in the CloudFormation console; `clusterkit up` again resumes, "
        "`clusterkit down` deletes"))


def wait_other(rt: Runtime, region: str, name: str, stack_id: str, status: str, *,
               timeout: float) -> str:
    """Wait for the stack another `up` or `down` left in progress (this machine holds the
    cluster's lock, so none of its own runs: another machine's, or one interrupted here,
    which CloudFormation finishes without it); its final status. AwsError (exit 1) when
    it is still in progress after ``timeout`` seconds."""
    rt.started(Stage.STACK, f"stack {name} in {region} is {status}: another `up` or `down` "
               "of the cluster is changing it (on another machine, or one interrupted "
               f"here: CloudFormation goes on); waiting for it to end (at most "
               f"{timeout:.0f} s, --timeout)")
    final = wait_stack(rt, region, stack_id, timeout=timeout)["status"]
    rt.done(Stage.STACK, f"stack {name} is {final}: planning from what is there now")
    return str(final)


@dataclass(frozen=True)
class Pending:
    """A stack still being created whose resources a launch needs are done
    (``outputs``: read from its events); ``finish`` waits for the rest."""

    region: str
    name: str
    stack_id: str
    outputs: Mapping[str, str]
    seen: set[str] = field(default_factory=set)
    own_permissions: bool = False  # created without the service role


def finish(rt: Runtime, pending: Pending, *, timeout: float) -> dict[str, Any]:
    """The stack of ``pending`` once complete (AwsError if it failed)."""
    final = wait_stack(rt, pending.region, pending.stack_id, timeout=timeout,
                       seen=pending.seen)
    return _checked(pending.name, final, pending.own_permissions)


def _as_role(role: StackRole, call: Callable[[], Any]) -> Any:
    """A stack call; refused with the service role, say what the user's policy lacks."""
    try:
        return call()
    except CredentialsError as err:
        if role.arn is None:
            raise
        raise CredentialsError(
            f"{err.message} (the stack calls pass the service role {role.arn})",
            "your policy needs the stack calls on stack/clusterkit-* and iam:PassRole on "
            "that role (`clusterkit iam-policy --role user` prints it); or set "
            f"{ENV}=none to run the stack with your own permissions",
            code=err.code, resource=err.resource) from err


def _created(rt: Runtime, region: str, name: str, create: Callable[[], str]) -> str:
    """CreateStack; a stack of that name made meanwhile (AlreadyExistsException) is
    another `up` of the cluster, here or elsewhere: said so, never `down`'s business."""
    try:
        return create()
    except AwsError as err:
        if err.code != "AlreadyExistsException":
            raise
        raise ClusterBusyError(
            f"stack {name} in {region} was created by someone else while this `up` ran: "
            "another `up` of the cluster is running (on another machine?)",
            "wait for it to end, then run `clusterkit up` again; this `up` changed nothing "
            "of that stack") from err


def _seen_before(rt: Runtime, region: str, stack_id: str) -> set[str]:
    return {e["id"] for e in cfn.stack_events(rt.session, region, stack_id)}


def deploy(rt: Runtime, region: str, name: str, action: StackAction | str,
           params: Mapping[str, str],
           tags: Mapping[str, str], *, timeout: float, current: Any = UNREAD,
           early: Early | None = None, role: StackRole | None = None,
           ) -> dict[str, Any] | Pending:
    """Run ``action`` (a StackAction) and return the stack.
    ``current``: the stack as the caller just read it (None: none), so it is not read
    again; one still in progress then is read again before anything waits on it.
    ``early``: a stack it creates is returned as ``Pending`` as soon as ``early(its
    events)`` gives the outputs the caller needs (``plan.provision.launch_outputs``).
    ``role``: the role the stack calls run as, as the plan says (None: looked up)."""
    if current is UNREAD or (current and current["status"].endswith("_IN_PROGRESS")):
        current = cfn.describe_stack(rt.session, region, name)
    if current and current["status"].endswith("_IN_PROGRESS"):
        rt.started(Stage.STACK, f"stack {name} is {current['status']}: waiting for it")
        wait_stack(rt, region, current["id"], timeout=timeout)
    action = StackAction(action)
    if action == StackAction.NONE:
        return current or {}
    role = role or stack_role(rt, region)
    if action == StackAction.RECREATE:  # a dead stack (gone meanwhile: made anew)
        if current:
            delete(rt, region, name, timeout=timeout, role=role)
        action = StackAction.CREATE
    params = {**params, **role.params()}
    if action == StackAction.CREATE:
        rt.started(Stage.STACK, f"creating stack {name} in {region}")
        stack_id = _created(rt, region, name, lambda: _as_role(role, lambda: cfn.create_stack(
            rt.session, region, name, params, tags, role.arn)))
        seen: set[str] = set()
        final, ready = wait_ready(rt, region, stack_id, timeout=timeout, seen=seen, early=early)
        if ready is not None:
            rt.info(f"stack {name}: what the launch needs is ready; the rest goes on "
                    "while the nodes boot", level=1)
            return Pending(region, name, stack_id, ready, seen, role.arn is None)
    elif action == StackAction.UPDATE:
        assert current is not None
        seen = _seen_before(rt, region, current["id"])
        rt.started(Stage.STACK, f"updating stack {name}")
        if not _as_role(role, lambda: cfn.update_stack(rt.session, region, name, params, tags,
                                                       role.arn)):
            return current
        final = wait_stack(rt, region, current["id"], timeout=timeout, seen=seen)
    return _checked(name, final, role.arn is None)


def _checked(name: str, final: dict[str, Any], own_permissions: bool) -> dict[str, Any]:
    """``final`` if the stack ended complete, else AwsError saying how it ended."""
    status = final["status"]
    result = None if status == "DELETE_COMPLETE" else final
    if status not in OK or result is None:
        reason = result["reason"] if result else ""
        own = ("; it ran with your own permissions: a resource 'not authorized' needs the "
               "service role (see the warning above)" if own_permissions else "")
        raise AwsError(f"stack {name} ended {status} {reason}".strip(),
                       "the events above say which resource failed; `clusterkit down` "
                       f"cleans up, then `clusterkit up` again{own}", resource=name)
    return result


def delete(rt: Runtime, region: str, name: str, *, timeout: float,
           role: StackRole | None = None) -> str | None:
    """Delete the stack if it exists and wait; the final status, or None if none."""
    current = cfn.describe_stack(rt.session, region, name)
    if current is None:
        return None
    seen = _seen_before(rt, region, current["id"])
    if current["status"].endswith("_IN_PROGRESS"):
        wait_stack(rt, region, current["id"], timeout=timeout, seen=seen)
    role = role or stack_role(rt, region)
    _as_role(role, lambda: cfn.delete_stack(rt.session, region, name, role.arn))
    return wait_stack(rt, region, current["id"], timeout=timeout, seen=seen)["status"]
