"""The sandbox's cut of the client's connections (`clusterkit sandbox cut-client`,
clusterkit_sandbox/clientcut.py) as the product honours it (clusterkit.sandboxmode
.client_cut, clusterkit.remote.connect): while the file in the state dir says so, a node
is not dialled and a connection open before fails at its next read or write; after, both
work again. Never outside sandbox mode, nor without the state dir named. Real sockets on
loopback."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit import sandboxmode
from clusterkit.netguard import SANDBOX_ENV
from clusterkit.remote.connect import dial
from clusterkit.sandboxmode import CLIENT_CUT_FILE, DIR_ENV
from clusterkit_sandbox.clientcut import do_cut_client
from clusterkit_sandbox.state import DAEMON_MODULE, STATE_FILE


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sandbox state dir named in sandbox mode; each read of the cut file is fresh."""
    monkeypatch.setenv(SANDBOX_ENV, "1")
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    monkeypatch.setattr(sandboxmode, "CUT_READ_EVERY", 0.0)
    return tmp_path


@pytest.fixture
def server() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener


def cut(where: Path, seconds: float) -> float:
    """The cut written to end ``seconds`` from now; its end."""
    until = time.time() + seconds
    (where / CLIENT_CUT_FILE).write_text(json.dumps({"until": until}))
    return until


def test_while_cut_no_node_is_dialled_and_an_open_connection_fails(where, server):
    before = dial(*server.getsockname(), timeout=2)
    peer, _ = server.accept()
    until = cut(where, 60)
    assert sandboxmode.client_cut() == until
    with pytest.raises(OSError) as refused:
        dial(*server.getsockname(), timeout=2)
    assert refused.value.errno == errno.ENETUNREACH
    assert "the sandbox cuts this client's connections until" in str(refused.value)
    for act in (lambda: before.recv(1), lambda: before.send(b"x")):
        with pytest.raises(OSError) as failed:
            act()
        assert failed.value.errno == errno.ENETUNREACH
    cut(where, -1)  # over: the same connection works again, and a new one is dialled
    assert sandboxmode.client_cut() is None
    assert before.send(b"x") == 1 and peer.recv(1) == b"x"
    dial(*server.getsockname(), timeout=2).close()
    before.close()
    peer.close()


def test_never_outside_sandbox_mode_nor_without_its_state_dir(where, server, monkeypatch):
    cut(where, 60)
    monkeypatch.delenv(SANDBOX_ENV)
    assert sandboxmode.client_cut() is None
    dial(*server.getsockname(), timeout=2).close()
    monkeypatch.setenv(SANDBOX_ENV, "1")
    monkeypatch.delenv(DIR_ENV)
    assert sandboxmode.client_cut() is None
    monkeypatch.setenv(DIR_ENV, str(where))
    (where / CLIENT_CUT_FILE).write_text('{"until": "later"}')  # not a time: no cut
    assert sandboxmode.client_cut() is None


def test_the_sandbox_verb_writes_the_cut_of_a_running_sandbox_only(where):
    with pytest.raises(ValueError, match="is not running"):
        do_cut_client(str(where), seconds=30)
    daemon = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()",
                               DAEMON_MODULE, str(where)])  # a daemon that waits to be killed
    try:
        (where / STATE_FILE).write_text(json.dumps({"endpoint": "http://127.0.0.1:9",
                                                    "pid": daemon.pid}))
        asked = time.time()
        said = do_cut_client(str(where), seconds=30)
        answered = time.time()
        assert said["state"] == "cut"
        until = sandboxmode.client_cut()
        assert until is not None and asked + 30 <= until <= answered + 30
        assert do_cut_client(str(where), seconds=0)["state"] == "healed"
        assert sandboxmode.client_cut() is None
        with pytest.raises(ValueError, match="not a length of time"):
            do_cut_client(str(where), seconds=-1)
    finally:
        daemon.kill()
        daemon.wait()
