"""Ctrl-C for real: a `clusterkit up` subprocess gets SIGINT mid-run; it must exit 130
without a traceback, saying which instances still run, their $/h and the `clusterkit
down` command that removes them; `down` must then leave zero resources of the cluster,
and a fresh `up` must work. Runs against the sandbox (moto in server mode + real sshd per node);
nothing is mocked. The spec's SSH port has no server behind it, so `up` is certain to
still be running (waiting for SSH) when the signal comes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from tests.integration.conftest import leftovers, runtime, write_spec

CLUSTERKIT = Path(sys.executable).parent / "clusterkit"


def _lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)
    into.put(None)


def _read_until(parts: queue.Queue, seen: list[str], done: Callable[[str], bool],
                what: str, timeout: float = 60.0) -> None:
    """Append what ``parts`` brings to ``seen`` until ``done(all of it)``."""
    deadline = time.monotonic() + timeout
    while not done("".join(seen)):
        try:
            part = parts.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {what} in {timeout}s:\n" + "".join(seen)) from None
        assert part is not None, f"up ended before {what}:\n" + "".join(seen)
        seen.append(part)


def default_sigint() -> None:
    """SIGINT as a terminal gives it to a command (a suite started in the background of a
    shell, which ignores SIGINT there, must not pass that on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_when(proc: subprocess.Popen, trigger: str) -> str:
    """Read the progress (stdout) until ``trigger`` shows, send SIGINT; all the output."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    _read_until(lines, seen, lambda text: trigger in text, repr(trigger))
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    return "".join(seen) + proc.stderr.read()


# "creating stack": the signal lands wherever `up` is by then (stack, launch, tagging);
# "waiting for SSH: 0/2 ready": all nodes run and are tagged, `up` waits and shows it.
@pytest.mark.parametrize("trigger", ["creating stack", "waiting for SSH: 0/2 ready"])
def test_sigint_to_up_then_down_leaves_nothing_then_up_works(cli_env, tmp_path, trigger):
    name = f"int-{uuid.uuid4().hex[:6]}"
    spec = str(write_spec(tmp_path, name=name, count=2, extra="  port: 2\n"))
    proc = subprocess.Popen([str(CLUSTERKIT), "up", spec, "--yes", "--timeout", "120"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            preexec_fn=default_sigint)
    try:
        err = _interrupt_when(proc, trigger)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert f"clusterkit down {name} --region us-east-1" in err, err
    running = leftovers(name).get("instances", [])
    assert all(iid in err for iid in running), (running, err)
    if running:
        assert f"still running: {len(running)} instance(s) of cluster {name}, $" in err, err

    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}
    result = do_up(spec, yes=True, rt=runtime(), wait_ssh=False, timeout=120)
    assert [n.role for n in result.nodes] == ["master", "worker"]
    assert len(leftovers(name)["instances"]) == 2
    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}



SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots": the frames of a live line


def _pty_reader(fd: int, into: queue.Queue) -> None:
    """Everything the terminal shows, in chunks, until no process holds it any more."""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the last writer closed it
            chunk = b""
        if not chunk:
            into.put(None)
            return
        into.put(chunk.decode(errors="replace"))


def _ctrl_c(proc: subprocess.Popen) -> None:
    """What Ctrl-C on the terminal does: SIGINT to its foreground process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)


def _impatient_ctrl_c(proc: subprocess.Popen, fd: int, trigger: str) -> str:
    """Read the terminal until ``trigger`` shows and its live line has spun a while,
    press Ctrl-C, then again every 50 ms from the moment `up` says it was interrupted
    until it exits (for at most 5 s): a user who saw the spinner still going. The
    terminal's whole output, escapes and all."""
    chunks: queue.Queue = queue.Queue()
    threading.Thread(target=_pty_reader, args=(fd, chunks), daemon=True).start()
    seen: list[str] = []
    _read_until(chunks, seen, lambda text: trigger in text and
                text.split(trigger, 1)[1].count(SPINNER[3]) >= 2, f"{trigger!r} spinning")
    _ctrl_c(proc)
    until = time.monotonic() + 5
    while (chunk := chunks.get(timeout=60)) is not None:
        seen.append(chunk)
        while "up interrupted" in "".join(seen) and proc.poll() is None \
                and time.monotonic() < until:
            _ctrl_c(proc)
            with contextlib.suppress(queue.Empty):
                if (chunk := chunks.get(timeout=0.05)) is None:
                    return "".join(seen)
                seen.append(chunk)
    return "".join(seen)


def test_ctrl_c_to_up_on_a_terminal_shows_what_still_runs(cli_env, tmp_path):
    """On a terminal `up` shows a live line under its output (rich). Ctrl-C must leave
    the lines that say what still runs, its $/h and the `down` command, as piped output
    does: the live line closes as `up` says it was interrupted (no spinner after it to
    make a user press again), and more presses meanwhile change nothing (they used to
    cut the lines off: `up interrupted`, then only `interrupted`)."""
    name = f"tty-{uuid.uuid4().hex[:6]}"
    spec = str(write_spec(tmp_path, name=name, count=2, extra="  port: 2\n"))
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([str(CLUSTERKIT), "up", spec, "--yes", "--timeout", "120"],
                            stdin=secondary, stdout=secondary, stderr=secondary,
                            start_new_session=True, env={**env, "TERM": "xterm-256color"},
                            preexec_fn=default_sigint)
    os.close(secondary)
    try:
        shown = _impatient_ctrl_c(proc, primary, "waiting for SSH on 2 node(s)")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        os.close(primary)
    try:
        assert proc.returncode == 130, shown
        assert "Traceback" not in shown and "Exception ignored" not in shown, shown
        running = leftovers(name).get("instances", [])
        assert len(running) == 2, running
        after = shown[shown.index("up interrupted"):]
        assert f"still running: 2 instance(s) of cluster {name}, $" in after, shown
        assert all(iid in after for iid in running), (running, shown)
        assert f"remove them: clusterkit down {name} --region us-east-1" in after, shown
        assert not set(SPINNER) & set(after), shown  # the live line was closed
    finally:
        do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}
