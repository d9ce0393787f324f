"""Commands on raw SSH session channels, for what Fabric's ``run`` does badly: bytes
sent to the command's stdin (invoke feeds a non-terminal stream one byte per 10 ms),
and output streamed line by line to a callback that can be stopped at any moment.

Same dialling as ``fanout`` (the master directly, workers through one shared gateway
connection), same typed results: one ``NodeResult`` per node; a failure on any node
raises one ``GroupError`` carrying all of them unless ``warn``.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fabric import Connection

from clusterkit.errors import GroupError
from clusterkit.remote.connect import Login, Target, describe
from clusterkit.remote.fanout import (
    TAIL_CHARS,
    Connections,
    _failed,
    _result,
)
from clusterkit.remote.results import GroupResult, NodeResult

LineSink = Callable[[str, str], None]  # (node label, line without its newline)
POLL = 0.1  # seconds between checks of the stop event while a channel is silent


@dataclass(frozen=True)
class Call:
    """One node's command and the bytes its stdin gets (then end of file)."""

    command: str
    stdin: bytes = b""


class _Output:
    """stdout/stderr of one channel: tails kept, stdout lines passed to ``sink``."""

    def __init__(self, label: str, sink: LineSink | None) -> None:
        self.label, self.sink = label, sink
        self.out, self.err, self.partial = bytearray(), bytearray(), b""

    def stdout(self, data: bytes) -> None:
        self.out += data
        del self.out[:-TAIL_CHARS]
        if self.sink is None:
            return
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            self.sink(self.label, line.decode("utf-8", "replace"))

    def stderr(self, data: bytes) -> None:
        self.err += data
        del self.err[:-TAIL_CHARS]

    def close(self) -> None:
        if self.sink is not None and self.partial:
            self.sink(self.label, self.partial.decode("utf-8", "replace"))
            self.partial = b""


def _pump(chan: object, output: _Output, stop: threading.Event | None,
          deadline: float | None) -> bool:
    """Read the channel until the command ends (True) or ``stop`` / the deadline
    comes first (False)."""
    while True:
        if stop is not None and stop.is_set():
            return False
        if deadline is not None and time.monotonic() > deadline:
            return False
        select.select([chan], [], [], POLL)
        got = False
        while chan.recv_ready():  # type: ignore[attr-defined]
            output.stdout(chan.recv(65536))  # type: ignore[attr-defined]
            got = True
        while chan.recv_stderr_ready():  # type: ignore[attr-defined]
            output.stderr(chan.recv_stderr(65536))  # type: ignore[attr-defined]
            got = True
        if not got and chan.exit_status_ready() and not chan.recv_ready() \
                and not chan.recv_stderr_ready():  # type: ignore[attr-defined]
            return True


def _session(login: Login, target: Target, conn: Connection, call: Call,
             sink: LineSink | None, stop: threading.Event | None,
             timeout: float | None) -> NodeResult:
    start = time.monotonic()
    output = _Output(target.hop.label, sink)
    try:
        conn.open()
        chan = conn.client.get_transport().open_session(timeout=login.connect_timeout)
    except Exception as exc:  # connection-level failure of this node only
        return _failed(target, describe(exc, login, target.hop),
                       seconds=round(time.monotonic() - start, 3))
    try:
        chan.exec_command(call.command)
        if call.stdin:
            chan.sendall(call.stdin)
        chan.shutdown_write()
        ended = _pump(chan, output, stop, None if timeout is None else start + timeout)
        output.close()
        fields = {"stdout": output.out.decode("utf-8", "replace"),
                  "stderr": output.err.decode("utf-8", "replace"),
                  "seconds": round(time.monotonic() - start, 3)}
        if not ended:
            why = "stopped" if stop is not None and stop.is_set() else \
                f"timed out after {timeout:g} s"
            return _result(target, error=why, **fields)
        return _result(target, exit_code=chan.recv_exit_status(), **fields)
    except Exception as exc:
        return _failed(target, describe(exc, login, target.hop),
                       seconds=round(time.monotonic() - start, 3))
    finally:
        chan.close()


def run_calls(login: Login, targets: Sequence[Target], calls: Mapping[str, Call], *,
              sink: LineSink | None = None, stop: threading.Event | None = None,
              timeout: float | None = None, warn: bool = False,
              pool: Connections | None = None) -> GroupResult:
    """``calls`` (label -> Call; a target without one is not dialled) on every target at
    once, each with its stdin bytes. ``sink`` gets every stdout line as it arrives;
    setting ``stop`` ends every command's channel at once (its result: error
    "stopped"). On the connections of ``pool`` when given (left open unless this run is
    interrupted), else on its own. Unless ``warn``, any failure raises one GroupError
    with every result."""
    targets = [t for t in targets if t.hop.label in calls]
    stop = stop or threading.Event()
    conns = pool if pool is not None else Connections(login, targets)
    # left early (Ctrl-C): every session ends before the transports close
    group = conns.each(targets, lambda t, c: _session(login, t, c, calls[t.hop.label], sink,
                                                      stop, timeout),
                       own=pool is None, interrupt=stop.set)
    if group.failed and not warn:
        raise GroupError(group)
    return group


def result_lines(result: NodeResult) -> list[str]:
    """A node's stdout as lines (a command's answer), without empty ones."""
    return [line for line in result.stdout.splitlines() if line.strip()]
