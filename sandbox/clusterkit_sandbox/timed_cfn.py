"""CloudFormation in the timed sandbox (`sandbox start --timings aws[:SCALE]`).

moto creates and deletes a stack's resources inside the CreateStack / DeleteStack call.
Timed, the stack is ``CREATE_IN_PROGRESS`` (``DELETE_IN_PROGRESS``) for the critical path
of its resources' figures (``stack_schedule``, ``timings.STACK_RESOURCES``): a thread of
the stack's own sleeps (no CPU) until each resource is due, says so in
DescribeStackEvents (``CREATE_IN_PROGRESS`` / ``CREATE_COMPLETE`` per resource, as AWS
does), and makes each resource when its figure is over, so what a resource needs exists
before it. Meanwhile DescribeStacks shows no outputs and DescribeStackResources only what
exists; an update is refused, as AWS refuses one. Deleting waits the other way round,
then moto deletes everything at once. Every resource's wait, and the stack's, is a line
in the timeline.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterkit_sandbox import moto_models as mm
from clusterkit_sandbox.stack_schedule import Step, create_schedule, delete_schedule
from clusterkit_sandbox.timed import Recorder
from clusterkit_sandbox.timings import Timings, Wait, stack_wait

log = logging.getLogger("clusterkit_sandbox.timed_cfn")
PATCHED = "__clusterkit_timed__"
STACK_TYPE = "AWS::CloudFormation::Stack"
STACK_CREATED = "stack CREATE_IN_PROGRESS -> CREATE_COMPLETE"
STACK_DELETED = "stack DELETE_IN_PROGRESS -> DELETE_COMPLETE"


@dataclass
class Run:
    """A stack's create or delete in progress."""

    stack: Any
    steps: list[Step]
    creating: bool
    start: float = field(default_factory=time.time)
    made: list[Any] = field(default_factory=list)  # resources created so far
    cancelled: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


_runs: dict[str, Run] = {}  # stack id -> its run in progress
_lock = threading.Lock()


def marks(steps: list[Step]) -> list[tuple[float, bool, Step]]:
    """(seconds from the start, ends?, step) in the order they happen: at one instant a
    resource ends before the one waiting for it starts."""
    order = {step.logical_id: i for i, step in enumerate(steps)}
    both = [(s.start, False, s) for s in steps] + [(s.end, True, s) for s in steps]
    return sorted(both, key=lambda m: (m[0], not m[1], order[m[2].logical_id]))


def _play(run: Run, begin: Callable[[Step], None], end: Callable[[Step], None]) -> bool:
    """Sleep to each mark and act on it; False when the run was cancelled."""
    for at, ends, step in marks(run.steps):
        if run.cancelled.wait(max(0.0, run.start + at - time.time())):
            return False
        (end if ends else begin)(step)
    return True


def _resources(stack: Any, deleting: bool) -> dict[str, Any]:
    """The template's resources whose condition holds (deleting: those not retained)."""
    found = {}
    for name, body in mm.stack_resources_json(stack).items():
        condition = body.get("Condition")
        if condition and not mm.stack_condition(stack, condition):
            continue
        if deleting and body.get("DeletionPolicy") == "Retain":
            continue
        found[name] = body
    return found


def _event(stack: Any, step: Step, status: str, physical: str = "",
           reason: str | None = None) -> None:
    mm.add_stack_event(stack, step.logical_id, physical, step.resource_type, status, reason)


def _start(run: Run, work: Callable[[], None]) -> None:
    with _lock:
        _runs[run.stack.stack_id] = run
    run.thread = threading.Thread(target=work, name=f"stack-{run.stack.name}", daemon=True)
    run.thread.start()


def _finish(run: Run) -> None:
    with _lock:
        if _runs.get(run.stack.stack_id) is run:
            del _runs[run.stack.stack_id]


def running(stack: Any) -> Run | None:
    with _lock:
        return _runs.get(stack.stack_id)


def _failed(run: Run, step: Step | None, exc: BaseException, statuses: tuple[str, ...],
            begun: tuple[Step, ...] = ()) -> None:
    """moto refused a resource: its ``CREATE_FAILED`` (and the others ``begun``:
    cancelled), then the stack's ``statuses``, the last one final (no resource is rolled
    back: moto keeps what it made)."""
    log.error("stack %s: %s failed: %s", run.stack.name, step.logical_id if step else "-", exc)
    reason = f"{type(exc).__name__}: {exc}"
    if step is not None:
        _event(run.stack, step, "CREATE_FAILED", reason=reason)
    for other in begun:
        if other != step:
            _event(run.stack, other, "CREATE_FAILED", reason="Resource creation cancelled")
    for status in statuses:
        mm.add_stack_event(run.stack, run.stack.name, run.stack.stack_id, STACK_TYPE, status,
                           reason)
    run.stack.status = statuses[-1]
    run.stack.status_reason = reason


def _create(run: Run, moto_create: Callable[[Any], None], recorder: Recorder) -> None:
    stack = run.stack
    current: list[Step | None] = [None]
    begun: dict[str, Step] = {}

    def begin(step: Step) -> None:
        begun[step.logical_id] = step
        _event(stack, step, "CREATE_IN_PROGRESS")

    def end(step: Step) -> None:
        current[0] = step
        made, physical = mm.make_stack_resource(stack, step.logical_id)
        del begun[step.logical_id]
        if made is not None:
            run.made.append(made)
        _event(stack, step, "CREATE_COMPLETE", physical)
        # the schedule's marks, start and end: the one waiting for it starts at this end
        # (the emulator's own lag on a loaded machine is not AWS's wait)
        recorder.add("wait", stack_wait(step.resource_type).value,
                     f"{stack.name}/{step.logical_id}", run.start + step.start,
                     run.start + step.end)

    try:
        if _play(run, begin, end):
            current[0] = None
            moto_create(stack)  # moto's own: tags, the stack's CREATE_COMPLETE
            recorder.add("wait", STACK_CREATED, stack.name, run.start, time.time())
    except Exception as exc:  # the stack says why, as AWS's would
        _failed(run, current[0], exc, ("ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE"),
                tuple(begun.values()))
    finally:
        _finish(run)


def _delete(run: Run, before: Run | None, moto_delete: Callable[[], None],
            recorder: Recorder) -> None:
    stack = run.stack
    if before is not None and before.thread is not None:
        before.thread.join()

    def end(step: Step) -> None:
        _event(stack, step, "DELETE_COMPLETE")
        recorder.add("wait", Wait.STACK_DELETE.value, f"{stack.name}/{step.logical_id}",
                     run.start + step.start, run.start + step.end)

    try:
        _play(run, lambda step: _event(stack, step, "DELETE_IN_PROGRESS"), end)
        _said_once(stack, moto_delete)
        recorder.add("wait", STACK_DELETED, stack.name, run.start, time.time())
    except Exception as exc:
        _failed(run, None, exc, ("DELETE_FAILED",))
    finally:
        _finish(run)


def _said_once(stack: Any, moto_delete: Callable[[], None]) -> None:
    """moto's delete (every resource, DELETE_COMPLETE, to the deleted stacks) without the
    DELETE_IN_PROGRESS it says again: that was said when the call came."""
    mark = len(stack.events)
    try:
        moto_delete()
    finally:
        again = stack.events[mark] if len(stack.events) > mark else None
        if again is not None and again.resource_status == "DELETE_IN_PROGRESS":
            del stack.events[mark]


def install(timings: Timings, recorder: Recorder) -> None:
    """Patch moto's CloudFormation models in this process (idempotent; nothing untimed)."""
    from moto.cloudformation.models import CloudFormationBackend, Stack

    if not timings.on or getattr(Stack.create_resources, PATCHED, False):
        return
    moto_create = Stack.create_resources

    def create_resources(self: Any) -> None:
        self.status = "CREATE_IN_PROGRESS"
        steps = create_schedule(_resources(self, deleting=False), timings.stack_create,
                                lambda name: mm.stack_condition(self, name))
        run = Run(self, steps, creating=True)
        _start(run, lambda: _create(run, moto_create, recorder))

    setattr(create_resources, PATCHED, True)
    Stack.create_resources = create_resources
    _hide_while_creating(Stack)
    _install_delete(CloudFormationBackend, timings, recorder)
    _refuse_updates(CloudFormationBackend)


def _hide_while_creating(stack_class: Any) -> None:
    """No outputs, and only the resources made so far, until the stack is created (moto
    would make every resource on the spot to answer)."""
    outputs, resources = stack_class.outputs, stack_class.stack_resources

    def creating(stack: Any) -> Run | None:
        # moto's own create ends by marking the stack complete, its outputs readable: from
        # then on nothing is hidden (its thread has not finished the run yet)
        run = running(stack)
        return run if run is not None and run.creating and \
            stack.status != "CREATE_COMPLETE" else None

    stack_class.outputs = property(
        lambda self: None if creating(self) else outputs.fget(self))
    stack_class.stack_resources = property(
        lambda self: list(run.made) if (run := creating(self)) else resources.fget(self))


def _live(backend: Any, name_or_id: str) -> Any:
    return next((s for s in list(backend.stacks.values())
                 if name_or_id in (s.stack_id, s.name)), None)


def _install_delete(backend_class: Any, timings: Timings, recorder: Recorder) -> None:
    moto_delete = backend_class.delete_stack

    @functools.wraps(moto_delete)
    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        stack = _live(self, name_or_stack_id)
        if stack is None:
            return moto_delete(self, name_or_stack_id)
        before = running(stack)
        if before is not None and not before.creating:
            return None  # being deleted already: AWS answers a second DeleteStack alike
        if before is not None:
            before.cancelled.set()  # AWS stops creating too
        mm.add_stack_event(stack, stack.name, stack.stack_id, STACK_TYPE,
                           "DELETE_IN_PROGRESS", "User Initiated")
        stack.status = "DELETE_IN_PROGRESS"
        steps = delete_schedule(_resources(stack, deleting=True),
                                lambda _kind: timings.stack_delete(),
                                lambda name: mm.stack_condition(stack, name))
        run = Run(stack, steps, creating=False)

        def delete_now() -> None:
            try:
                moto_delete(self, stack.stack_id)
            except Exception:
                self.stacks.setdefault(stack.stack_id, stack)  # DELETE_FAILED: still there
                raise

        _start(run, lambda: _delete(run, before, delete_now, recorder))
        return None

    backend_class.delete_stack = delete_stack


def _refuse_updates(backend_class: Any) -> None:
    moto_update = backend_class.update_stack

    @functools.wraps(moto_update)
    def update_stack(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        stack = _live(self, name)
        if stack is not None and running(stack) is not None:
            from moto.cloudformation.exceptions import ValidationError

            raise ValidationError(name, message=f"Stack:{stack.stack_id} is in "
                                  f"{stack.status} state and can not be updated.")
        return moto_update(self, name, *args, **kwargs)

    backend_class.update_stack = update_stack
