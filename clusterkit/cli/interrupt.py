"""Ctrl-C on a command that says what it leaves behind when interrupted (`up`: the
instances still running, their $/h, the `down` command). The first press interrupts it
(KeyboardInterrupt, as Python's own handler does); the presses in the next ``GRACE``
seconds are ignored, so an impatient second press cannot cut that report off half
way (or turn exit 130 into a traceback). A press after the grace interrupts again."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

GRACE = 10.0  # seconds: the report is a few AWS reads


class FirstPress:
    """A SIGINT handler: KeyboardInterrupt, unless the last one was raised less than
    ``grace`` seconds ago."""

    def __init__(self, grace: float = GRACE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.grace, self.clock = grace, clock
        self.pressed: float | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        now = self.clock()
        if self.pressed is not None and now - self.pressed < self.grace:
            return
        self.pressed = now
        raise KeyboardInterrupt


@contextlib.contextmanager
def reported_interrupt(grace: float = GRACE) -> Iterator[FirstPress | None]:
    """``FirstPress`` as the SIGINT handler while the block runs (None, and Python's own
    handler, off the main thread or where another handler is set). Once it was pressed
    the handler stays: the command is ending, and its exit must not be cut off either."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield None
        return
    handler = FirstPress(grace)
    signal.signal(signal.SIGINT, handler)
    try:
        yield handler
    finally:
        if handler.pressed is None:
            signal.signal(signal.SIGINT, signal.default_int_handler)
