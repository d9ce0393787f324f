"""Run one command on many nodes at once over Fabric; every node's result is kept
(``remote/results.py``), and any failure raises one ``GroupError`` with all of them.

Output is streamed live, each line prefixed with its node's label. Workers are reached
through one shared connection to the gateway (the master), opened first; a node that
cannot be reached, or whose host key does not match, fails on its own and the others
still run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from fabric import Connection
from invoke.exceptions import CommandTimedOut

from clusterkit.errors import GroupError, RemoteError
from clusterkit.remote.connect import Login, Target, connect, describe
from clusterkit.remote.results import GroupResult, NodeResult

TAIL_CHARS = 64 * 1024  # of stdout / stderr kept per node in the results
MAX_THREADS = 64


class PrefixedStream:
    """A write-only text stream that emits whole lines as ``[label] line`` on ``sink``;
    one lock shared by every node keeps lines from interleaving mid-line."""

    def __init__(self, label: str, sink: TextIO, lock: threading.Lock) -> None:
        self.label, self.sink, self.lock, self.partial = label, sink, lock, ""

    def write(self, data: str) -> int:
        *lines, self.partial = (self.partial + data).split("\n")
        if lines:
            with self.lock:
                self.sink.write("".join(f"[{self.label}] {line}\n" for line in lines))
                self.sink.flush()
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def close(self) -> None:
        if self.partial:
            self.write("\n")


def _tail(text: str) -> str:
    return text[-TAIL_CHARS:]


def _result(target: Target, **fields: Any) -> NodeResult:
    return NodeResult(target.node, target.hop.label, target.hop.address,
                      target.via.address if target.via else None, **fields)


def _failed(target: Target, err: RemoteError, **fields: Any) -> NodeResult:
    return _result(target, error=err.message, hint=err.hint, **fields)


def _run_one(login: Login, target: Target, conn: Connection, command: str,
             timeout: float | None, out: TextIO | None, lock: threading.Lock) -> NodeResult:
    start = time.monotonic()
    streams = [PrefixedStream(target.hop.label, out, lock) for _ in range(2)] if out else []
    kwargs: dict[str, Any] = {"warn": True, "pty": False, "in_stream": False,
                              "hide": not streams, "timeout": timeout}
    if streams:
        kwargs.update(out_stream=streams[0], err_stream=streams[1])
    try:
        res = conn.run(command, **kwargs)
    except CommandTimedOut as exc:
        return _timed_out(target, exc.result, timeout, start)
    except Exception as exc:  # connection-level failure of this node only
        return _failed(target, describe(exc, login, target.hop),
                       seconds=round(time.monotonic() - start, 3))
    finally:
        for stream in streams:
            stream.close()
    if res.exited != 0 and timeout is not None and time.monotonic() - start >= timeout:
        # invoke can return the killed command's result (exit -1) instead of raising
        # CommandTimedOut when its timer thread has not quite finished yet.
        return _timed_out(target, res, timeout, start)
    return _result(target, exit_code=res.exited, stdout=_tail(res.stdout),
                   stderr=_tail(res.stderr), seconds=round(time.monotonic() - start, 3))


def _timed_out(target: Target, res: Any, timeout: float, start: float) -> NodeResult:
    return _result(target, stdout=_tail(res.stdout), stderr=_tail(res.stderr),
                   error=f"timed out after {timeout:g} s",
                   hint="raise --timeout, or check what the command waits for",
                   seconds=round(time.monotonic() - start, 3))


def _gateway(login: Login, targets: Sequence[Target]) -> tuple[Connection | None,
                                                               RemoteError | None]:
    """The one shared connection to the gateway, opened (or why it could not be)."""
    via = next((t.via for t in targets if t.via), None)
    if via is None:
        return None, None
    try:
        conn = connect(login, via)
        conn.open()
        return conn, None
    except Exception as exc:
        return None, describe(exc, login, via)


def _connections(login: Login, targets: Sequence[Target], gw: Connection | None,
                 gw_error: RemoteError | None) -> dict[str, Connection | RemoteError]:
    out: dict[str, Connection | RemoteError] = {}
    for t in targets:
        if gw is not None and t.via is None and t.hop.address == gw.host:
            out[t.hop.label] = gw  # the master itself: reuse the gateway connection
        elif t.via is not None and gw_error is not None:
            out[t.hop.label] = RemoteError(f"through gateway {t.via.label}: "
                                           f"{gw_error.message}", gw_error.hint)
        else:
            try:
                out[t.hop.label] = connect(login, t.hop, gateway=gw if t.via else None)
            except RemoteError as err:
                out[t.hop.label] = err
    return out


class Connections:
    """Connections to ``targets`` kept open across several fan-outs (``run_each(...,
    pool=)``), so a node is dialled once: bootstrap gathers facts and runs its steps on
    the same connection, one SSH handshake per node instead of two. Each connection
    opens on its first command; ``close`` (or leaving the ``with``) closes them all."""

    def __init__(self, login: Login, targets: Sequence[Target]) -> None:
        self.gw, self.gw_error = _gateway(login, targets)
        self.conns = _connections(login, targets, self.gw, self.gw_error)

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in [c for c in self.conns.values() if isinstance(c, Connection)] + [self.gw]:
            if conn is not None:
                conn.close()

    def each(self, targets: Sequence[Target], work: Callable[[Target, Connection], NodeResult],
             *, own: bool, interrupt: Callable[[], None], parallel: int = MAX_THREADS,
             ) -> GroupResult:
        """``work(target, connection)`` for every target at once (at most ``parallel``);
        a target whose connection could not be made fails on its own. Left early (an
        error, Ctrl-C), ``interrupt`` first ends the work still running, then the
        connections close; they close at the end too when they are the run's ``own``."""
        workers = ThreadPoolExecutor(max_workers=max(1, min(parallel, MAX_THREADS,
                                                            len(targets))))
        done = False
        try:
            futures = {t.hop.label: workers.submit(work, t, c) for t in targets
                       if isinstance(c := self.conns[t.hop.label], Connection)}
            group = GroupResult(futures[t.hop.label].result() if t.hop.label in futures
                                else _failed(t, self.conns[t.hop.label])  # type: ignore[arg-type]
                                for t in targets)
            done = True
        finally:
            if not done:
                interrupt()
            workers.shutdown(wait=True)
            if own or not done:
                self.close()
        return group


def run_all(login: Login, targets: Sequence[Target], command: str, *,
            timeout: float | None = None, out: TextIO | None = None,
            warn: bool = False) -> GroupResult:
    """``command`` on every target concurrently, waiting for all of them; one NodeResult
    per target, in target order. Unless ``warn``, a failure on any node (could not run,
    timed out, exit code not 0) raises one GroupError carrying every node's result."""
    return run_each(login, targets, {t.hop.label: command for t in targets},
                    timeout=timeout, out=out, warn=warn)


def run_each(login: Login, targets: Sequence[Target], commands: Mapping[str, str], *,
             timeout: float | None = None, out: TextIO | None = None, warn: bool = False,
             parallel: int = MAX_THREADS, pool: Connections | None = None) -> GroupResult:
    """``run_all`` with a command of its own per node (``commands``: label -> command; a
    target without one is not dialled nor listed), at most ``parallel`` at a time, on the
    connections of ``pool`` when given (left open, unless this run fails or is
    interrupted), else on connections of its own (closed at the end)."""
    targets = [t for t in targets if t.hop.label in commands]
    lock = threading.Lock()
    conns = pool if pool is not None else Connections(login, targets)
    # left early (Ctrl-C): closing the transports first ends the remote reads at once
    group = conns.each(targets, lambda t, c: _run_one(login, t, c, commands[t.hop.label],
                                                      timeout, out, lock),
                       own=pool is None, interrupt=conns.close, parallel=parallel)
    if group.failed and not warn:
        raise GroupError(group)
    return group


Next = Callable[[Target, "NodeResult | None"], "str | None"]


def chain_each(login: Login, targets: Sequence[Target], next_command: Next, *,
               timeout: float | None = None, parallel: int = MAX_THREADS,
               pool: Connections | None = None) -> dict[str, list[NodeResult]]:
    """On each target, commands one after another on its one connection, each chosen by
    ``next_command(target, the last one's result or None)`` (None: that node is done),
    every node at its own pace: none waits for another between its commands (bootstrap
    runs a node's steps as soon as that node's facts are in). label -> its results in
    order (one failed result when it could not be dialled); a command that could not
    run (connection lost, timed out) ends its node's chain."""
    lock = threading.Lock()
    results: dict[str, list[NodeResult]] = {t.hop.label: [] for t in targets}

    def work(target: Target, conn: Connection) -> NodeResult:
        last: NodeResult | None = None
        while (command := next_command(target, last)) is not None:
            last = _run_one(login, target, conn, command, timeout, None, lock)
            results[target.hop.label].append(last)
            if last.error is not None:
                break
        return last or _result(target, exit_code=0)

    conns = pool if pool is not None else Connections(login, targets)
    group = conns.each(targets, work, own=pool is None, interrupt=conns.close,
                       parallel=parallel)
    for label, res in group.items():
        if not results[label]:
            results[label] = [res]
    return results
