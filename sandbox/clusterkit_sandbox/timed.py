"""The timed sandbox (`sandbox start --timings aws[:SCALE]`): the waits of
``timings.Timings`` put into the emulator, and a record of each call and wait.

- Each API call is held back by its family's round trip in the HTTP server's request
  thread (a sleep: no CPU), before moto answers it.
- A launched instance is ``pending`` until a timer makes it ``running``; the node agent
  starts its sshd only once the instance has been running for the SSH wait.
- A stack is ``*_IN_PROGRESS`` for the critical path of its resources (``timed_cfn``);
  a volume from a snapshot ``creating``, an attachment ``attaching``, a snapshot
  ``pending`` (``timed_ebs``); an EFS file system or mount target ``creating``
  (``timed_efs``). Each is a state set at once and a timer that sets the next one, so a
  wait costs no CPU; each ends with a wait line.
- ``run/timeline.jsonl`` gets one line per call and per wait (what, the resource, start
  and end, wall-clock seconds), the sandbox's own record of what AWS made clusterkit wait
  for: the benches compute the critical path from it.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from clusterkit_sandbox.timings import Timings, Wait

TIMELINE_FILE = "timeline.jsonl"
_serving = threading.local()  # .operation: the API call this request thread serves


class Recorder:
    """Appends timeline lines (thread-safe); a None path records nothing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def add(self, kind: str, what: str, resource: str, start: float, end: float) -> None:
        if self.path is None:
            return
        line = json.dumps({"kind": kind, "what": what, "resource": resource,
                           "start": round(start, 4), "end": round(end, 4)})
        with self._lock, open(self.path, "a") as out:
            out.write(line + "\n")


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """The recorded lines, oldest first ([] when there is no record)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def operation_of(environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The API operation a request calls (``Action`` of the query protocols, the
    ``X-Amz-Target`` of the JSON ones, else Describe/Write /path), and the environ with
    its body readable again (only a form body is read: block uploads pass untouched)."""
    query = parse_qs(environ.get("QUERY_STRING", ""))
    form: dict[str, list[str]] = {}
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        size = int(environ.get("CONTENT_LENGTH") or 0)  # a query-protocol call: small
        body = environ["wsgi.input"].read(size) if size > 0 else b""
        environ = {**environ, "wsgi.input": io.BytesIO(body)}
        form = parse_qs(body.decode("utf-8", "replace"))
    action = (query.get("Action") or form.get("Action") or [""])[0]
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if action:
        return action, environ
    if target:
        return target.rsplit(".", 1)[-1], environ
    method = environ.get("REQUEST_METHOD", "GET")
    verb = "Describe" if method in ("GET", "HEAD") else "Write"
    return f"{verb} {environ.get('PATH_INFO', '/')}", environ


def timed_app(app: Callable[..., Iterable[bytes]], timings: Timings, recorder: Recorder,
              sleep: Callable[[float], None] = time.sleep) -> Callable[..., Iterable[bytes]]:
    """``app`` with each call held back by its round trip (``sleep``: no CPU), and
    recorded."""
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        operation, environ = operation_of(environ)
        start = time.time()
        sleep(timings.round_trip(operation))
        if timings.on:
            with serving_call(operation):
                result = app(environ, start_response)
        else:
            result = app(environ, start_response)
        recorder.add("call", operation, "", start, time.time())
        return result

    return wrapped


@contextmanager
def serving_call(operation: str) -> Iterator[None]:
    """This thread serves the API call ``operation`` meanwhile (``serving``)."""
    before = getattr(_serving, "operation", None)
    _serving.operation = operation
    try:
        yield
    finally:
        _serving.operation = before


def serving() -> str | None:
    """The API call this thread serves (the timed server's request threads), else None
    (a stack's own thread, the agent, moto making its AMIs' snapshots at start): the
    timed models hold back only what a call itself made."""
    return getattr(_serving, "operation", None)


def hold(what: Wait, resource: str, seconds: float, release: Callable[[], bool],
         recorder: Recorder, timer_of: Callable[..., Any] = threading.Timer) -> None:
    """After ``seconds`` (a timer, ``timer_of``: no CPU), ``release`` the state held
    since now; a wait line when it changed something (False: the resource went
    meanwhile)."""
    start = time.time()

    def done() -> None:
        if release():
            recorder.add("wait", what.value, resource, start, time.time())

    timer = timer_of(seconds, done)
    timer.daemon = True
    timer.start()


def _set_running_later(instance: Any, seconds: float, recorder: Recorder) -> None:
    from clusterkit_sandbox.moto_models import set_instance_state

    set_instance_state(instance, "pending")
    hold(Wait.INSTANCE_RUNNING, instance.id, seconds,
         lambda: set_instance_state(instance, "running", only_from="pending"), recorder)


def install_instance_waits(timings: Timings, recorder: Recorder) -> None:
    """Launched instances stay pending for the wait (idempotent: patched once)."""
    from moto.ec2.models.instances import InstanceBackend

    if not timings.on or getattr(InstanceBackend.run_instances, "_timed", False):
        return
    original = InstanceBackend.run_instances

    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original(self, *args, **kwargs)
        for instance in reservation.instances:
            _set_running_later(instance, timings.wait(Wait.INSTANCE_RUNNING), recorder)
        return reservation

    run_instances._timed = True  # type: ignore[attr-defined]
    InstanceBackend.run_instances = run_instances
