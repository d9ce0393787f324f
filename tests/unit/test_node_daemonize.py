"""The one daemonize of the node programs (node/daemonize.py), run for real in a child
process of the test (a fork in pytest's own process would carry pytest on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clusterkit.node import daemonize
from tests.support import wait_for

HERE = Path(daemonize.__file__).parent


def _run(tmp_path: Path, body: str) -> dict:
    """``body`` run in a fresh python beside daemonize.py; its last stdout line, as JSON."""
    script = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(HERE)!r})
        from daemonize import daemonize, spawn
        log, pid_file = {str(tmp_path / "d.log")!r}, {str(tmp_path / "d.pid")!r}
    """) + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=30, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _proc(pid: int) -> dict:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return {"sid": int(stat[3]), "cwd": os.readlink(f"/proc/{pid}/cwd"),
            "fds": sorted(int(n) for n in os.listdir(f"/proc/{pid}/fd"))}


def _kill(pid: int) -> None:
    os.kill(pid, 9)
    wait_for(lambda: _gone(pid), f"daemon {pid} gone", timeout=10)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_daemonize_detaches_and_the_caller_gets_the_pid_in_the_pid_file(tmp_path) -> None:
    got = _run(tmp_path, """
        import time
        pid = daemonize(log, pid_file)
        if pid == 0:
            print("from the daemon", os.getpid(), os.getsid(0), flush=True)
            time.sleep(60)
            os._exit(0)
        print(json.dumps({"pid": pid, "me": os.getpid(), "file": open(pid_file).read()}))
    """)
    pid = got["pid"]
    try:
        assert got["file"] == f"{pid}\n" and pid != got["me"]
        proc = _proc(pid)
        # a session of its own, not its leader (no terminal can become its own), in /
        assert proc["sid"] not in (pid, os.getsid(0)) and proc["cwd"] == "/"
        wait_for(lambda: "daemon" in (tmp_path / "d.log").read_text(), "the log", timeout=10)
        assert (tmp_path / "d.log").read_text() == f"from the daemon {pid} {proc['sid']}\n"
        assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
        assert (tmp_path / "d.log").stat().st_mode & 0o777 == 0o600
        assert (tmp_path / "d.pid").stat().st_mode & 0o777 == 0o600
    finally:
        _kill(pid)


def test_spawn_runs_the_program_detached_with_only_stdio(tmp_path) -> None:
    (tmp_path / "d.log").write_text("before\n")
    (tmp_path / "d.log").chmod(0o644)
    got = _run(tmp_path, """
        leaked = os.open(os.devnull, os.O_RDONLY)
        os.set_inheritable(leaked, True)  # as an SSH session's pipe may be
        pid = spawn(["/bin/sleep", "60"], log, pid_file)
        print(json.dumps({"pid": pid, "file": open(pid_file).read()}))
    """)
    pid = got["pid"]
    try:
        assert got["file"] == f"{pid}\n"
        assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"/bin/sleep\x0060\x00"
        proc = _proc(pid)
        assert proc["sid"] not in (pid, os.getsid(0)) and proc["cwd"] == "/"
        assert proc["fds"] == [0, 1, 2]
        assert os.readlink(f"/proc/{pid}/fd/1") == str(tmp_path / "d.log")
        assert (tmp_path / "d.log").read_text() == "before\n"  # appended to, not truncated
        assert (tmp_path / "d.log").stat().st_mode & 0o777 == 0o600
    finally:
        _kill(pid)


def test_a_program_that_cannot_run_fails_the_caller(tmp_path) -> None:
    with pytest.raises(AssertionError, match="the daemon did not start"):
        _run(tmp_path, 'spawn(["/nonexistent/program"], log, pid_file)\n')


def test_a_log_that_cannot_be_opened_fails_the_caller_before_any_fork(tmp_path) -> None:
    with pytest.raises(AssertionError, match="FileNotFoundError"):
        _run(tmp_path, 'daemonize(log + "/missing/x", pid_file)\n')
    assert not (tmp_path / "d.pid").exists()
