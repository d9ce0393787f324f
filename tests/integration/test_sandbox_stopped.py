"""Issue 36 item 6: a sandbox that stopped after a command found it running (its daemon
still there, its endpoint refusing connections) is named as such by every command that
calls AWS, as the commands that find no sandbox at all do: "the sandbox is not running",
the hint to start it, exit 1, never `unexpected error: EndpointConnectionError`.

The "daemon" is a sleeping process whose command line names the sandbox's server module
and state directory (what ``clusterkit_sandbox.state.is_daemon`` and sandbox mode's
``clusterkit.sandboxmode.daemon_alive`` check), and state.json and the configuration it
hands clusterkit (mode.json) point at a loopback port nothing listens on; each command
runs as the user runs it, in a process of its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit_sandbox import client, credentials
from clusterkit_sandbox.state import DAEMON_MODULE, DIR_ENV, STATE_FILE
from clusterkit_sandbox.timings import Timings

ROOT = Path(__file__).parents[2]
SPEC = str(ROOT / "examples" / "sandbox-cpu.yaml")
COMMANDS = (
    ["status", "stopped"], ["plan", SPEC], ["up", SPEC, "--yes"], ["down", "stopped", "--yes"],
    ["spot", "--instance-types", "c5.large"],
    ["capacity-blocks", "--type", "p5.48xlarge", "--count", "1", "--duration", "24h"],
    ["sandbox", "interrupt", "stopped", "worker-1"], ["sandbox", "partition", "stopped", "1"],
)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def stopped_sandbox(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a shell in sandbox mode whose sandbox stopped answering."""
    where = tmp_path / "sandbox"
    where.mkdir()
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                               DAEMON_MODULE, str(where)])
    try:
        endpoint = f"http://127.0.0.1:{_closed_port()}"
        (where / STATE_FILE).write_text(json.dumps({"endpoint": endpoint, "pid": daemon.pid}))
        client.hand_over(where, endpoint, daemon.pid, Timings())
        credentials.write(where, credentials.Keys())  # as its daemon did at its start
        home = tmp_path / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CLUSTERKIT_"))}
        yield {**env, "CLUSTERKIT_SANDBOX": "1", DIR_ENV: str(where), "HOME": str(home)}
    finally:
        daemon.kill()
        daemon.wait()


def test_every_aws_command_says_the_sandbox_is_not_running(stopped_sandbox):
    clusterkit = [sys.executable, "-m", "clusterkit"]
    runs = [subprocess.Popen([*clusterkit, *argv], env=stopped_sandbox, cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for argv in COMMANDS]
    for argv, run in zip(COMMANDS, runs, strict=True):
        out, err = run.communicate(timeout=120)
        assert run.returncode == 1, (argv, out, err)
        assert "error: the sandbox is not running (" in err, (argv, err)
        assert "hint: start it with `clusterkit sandbox start`" in err, (argv, err)
        assert "unexpected error" not in err and "Traceback" not in err, (argv, err)
