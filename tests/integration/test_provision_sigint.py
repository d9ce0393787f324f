"""Ctrl-C for real: a `clusterkit up` subprocess gets SIGINT mid-run; it must exit 130
without a traceback, saying which instances still run, their $/h and the `clusterkit
down` command that removes them; `down` must then leave zero resources of the cluster,
and a fresh `up` must work. Runs against the sandbox (moto in server mode + real sshd per node);
nothing is mocked. The spec's SSH port has no server behind it, so `up` is certain to
still be running (waiting for SSH) when the signal comes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
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


def _interrupt_when(proc: subprocess.Popen, trigger: str, timeout: float = 60.0) -> str:
    """Read the progress (stdout) until ``trigger`` shows, send SIGINT; all the output."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while trigger not in "".join(seen):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {trigger!r} in {timeout}s:\n" + "".join(seen)) from None
        assert line is not None, "up ended before the trigger:\n" + "".join(seen)
        seen.append(line)
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
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
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
