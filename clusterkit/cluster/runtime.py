"""What every orchestration step needs besides the spec: the AWS session (its region and
profile), where progress goes (a reporter; cluster/ never prints), and the clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from clusterkit.events import Event, Kind, Reporter, Stage, null_reporter
from clusterkit.timescale import time_scale

T = TypeVar("T")
POLL = 2.0  # seconds between two reads of something AWS is making
AT_ONCE = 16  # AWS calls (one per node or volume) made at once


class LazySession:
    """The boto3 session, made at its first use: a command that ends up calling no AWS
    API (`train` on the nodes `up` last saw) never imports boto3 (~0.2 s)."""

    def __init__(self, region: str | None, profile: str | None) -> None:
        self._region, self._profile = region, profile
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:
        if name in ("_region", "_profile", "_real"):  # not set yet (a copy): no recursion
            raise AttributeError(name)
        if self._real is None:
            from clusterkit.aws.session import make_session

            self._real = make_session(self._region, self._profile)
        return getattr(self._real, name)


@dataclass
class Runtime:
    """An AWS session (boto3, made by aws.session), the reporter events go to, and the
    clocks (tests pass a short poll, and a ``sleep`` that moves ``clock`` and ``wall``)."""

    session: Any
    report: Reporter = null_reporter
    poll: float = POLL
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time  # the date (epoch s): a Capacity Block's start

    @classmethod
    def make(cls, *, region: str | None = None, profile: str | None = None,
             session: Any = None, report: Reporter | None = None) -> Runtime:
        """The command's runtime: polls every ``POLL`` seconds (at a timed sandbox's
        scale: ``clusterkit.timescale``)."""
        return cls(session=session if session is not None else LazySession(region, profile),
                   report=report or null_reporter, poll=POLL * time_scale())

    def emit(self, kind: Kind, text: str, *, stage: Stage | None = None, level: int = 0,
             node: str | None = None, done: int | None = None,
             total: int | None = None) -> None:
        self.report(Event(kind, text, stage=stage, node=node, done=done, total=total,
                          level=level))

    def info(self, text: str, *, level: int = 0, stage: Stage | None = None) -> None:
        self.emit(Kind.INFO, text, level=level, stage=stage)

    def warn(self, text: str, *, level: int = 0, stage: Stage | None = None) -> None:
        self.emit(Kind.WARNING, text, level=level, stage=stage)

    def error(self, text: str, *, level: int = 0, stage: Stage | None = None) -> None:
        self.emit(Kind.ERROR, text, level=level, stage=stage)

    def started(self, stage: Stage, text: str, *, level: int = 0) -> None:
        self.emit(Kind.STAGE_STARTED, text, stage=stage, level=level)

    def done(self, stage: Stage, text: str, *, level: int = 0) -> None:
        self.emit(Kind.STAGE_DONE, text, stage=stage, level=level)

    def wait_until(self, probe: Callable[[], tuple[bool, T]], *, deadline: float,
                   late: Callable[[T], Exception], first: float | None = None) -> T:
        """The one poll loop: ``probe()`` -> (done, what it saw) until done, sleeping
        ``poll`` between rounds (``first``: start there and double up to ``poll``, for
        waits that often end at once). Past ``deadline``, ``late(last seen)`` is raised.
        A probe raises itself for a state that can never get there."""
        interval = min(first, self.poll) if first is not None else self.poll
        while True:
            finished, seen = probe()
            if finished:
                return seen
            if self.clock() >= deadline:
                raise late(seen)
            self.sleep(interval)
            interval = min(interval * 2, self.poll)


def at_once(items: Sequence[Any], fn: Callable[[Any], T], most: int = AT_ONCE) -> list[T]:
    """``fn`` on every item at once (``most`` at a time: AWS calls, one per node or
    volume), results in order; every call finishes, then the first error is raised."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(most, len(items))) as pool:
        futures = [pool.submit(fn, item) for item in items]
        errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return [f.result() for f in futures]
