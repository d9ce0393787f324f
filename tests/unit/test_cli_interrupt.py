"""Ctrl-C during `up` on a terminal (issue 36): the live line closes when the command
says it failed or was interrupted, and a second press while `up` says what still runs
is ignored for a grace period (tests/integration/test_provision_sigint.py runs it on a
real terminal)."""

from __future__ import annotations

import io
import signal

import pytest
from rich.console import Console

from clusterkit.cli.events import ConsoleReporter
from clusterkit.cli.interrupt import FirstPress, reported_interrupt
from clusterkit.events import Event, Kind, Stage


def test_a_command_level_error_closes_the_live_line_before_its_line():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    report = ConsoleReporter(console)
    report(Event(Kind.STAGE_STARTED, "waiting for SSH on 2 node(s)", stage=Stage.SSH))
    assert report._bar is not None
    report(Event(Kind.ERROR, "failed: no capacity", stage=Stage.LAUNCH, level=1))
    assert report._bar is not None  # a stage's own error: its wait goes on
    report(Event(Kind.ERROR, "up interrupted"))
    assert report._bar is None
    report(Event(Kind.INFO, "still running: 2 instance(s) of cluster c, $0.1700/h:"))
    after = out.getvalue().split("up interrupted", 1)[1]
    assert "still running" in after and "ssh" not in after  # plain lines from there


def test_the_first_press_interrupts_and_the_next_ones_wait_for_the_grace():
    now = [100.0]
    press = FirstPress(grace=10.0, clock=lambda: now[0])
    with pytest.raises(KeyboardInterrupt):
        press(signal.SIGINT, None)
    now[0] += 9.9
    press(signal.SIGINT, None)  # ignored: `up` is saying what still runs
    now[0] += 0.2
    with pytest.raises(KeyboardInterrupt):
        press(signal.SIGINT, None)


def test_the_handler_is_put_back_unless_it_was_pressed():
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with reported_interrupt() as handler:
            assert signal.getsignal(signal.SIGINT) is handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt), reported_interrupt() as handler:
            assert handler is not None
            handler(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is handler  # the exit is not cut off either
        with reported_interrupt() as other:  # someone else's handler: left alone
            assert other is None and signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, before)
