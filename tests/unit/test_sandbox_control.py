"""`sandbox start|stop|status` on state dirs that are broken, stale or not the sandbox's:
clear errors, and stop never signals or deletes anything that is not its own."""

from __future__ import annotations

import json
import subprocess

import pytest

from clusterkit.errors import SandboxError
from clusterkit_sandbox.control import do_start, do_status, do_stop
from clusterkit_sandbox.state import is_daemon, pid_alive


@pytest.mark.parametrize("text", ["garbage", "[1, 2]", '{"pid": "abc"}', '{"pid": true}',
                                  '{"endpoint": 5}', "\xff\xfe"])
def test_broken_state_file_reads_as_not_running(tmp_path, text):
    (tmp_path / "state.json").write_text(text, errors="surrogateescape")
    (tmp_path / "nodes.json").write_text(text, errors="surrogateescape")
    assert do_status(tmp_path)["running"] is False
    assert do_stop(tmp_path)["was_running"] is False


def test_stale_pid_of_another_process_is_never_signalled(tmp_path):
    """After a reboot state.json may name a pid that now belongs to something else."""
    other = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "state.json").write_text(json.dumps(
            {"pid": other.pid, "endpoint": "http://127.0.0.1:1"}))
        assert not is_daemon(other.pid, tmp_path)
        assert do_status(tmp_path)["running"] is False
        assert do_stop(tmp_path) == {"dir": str(tmp_path), "was_running": False, "killed": 0,
                                     "unmounted": 0, "loops_detached": 0}
        assert pid_alive(other.pid)
    finally:
        other.kill()
        other.wait()


def test_a_run_dir_that_is_not_the_sandboxs_is_left_alone(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "precious").write_text("mine")
    with pytest.raises(SandboxError, match="not the sandbox's"):
        do_start(tmp_path)
    do_stop(tmp_path)
    assert (tmp_path / "run" / "precious").read_text() == "mine"


def test_unusable_state_dir_is_a_sandbox_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SandboxError, match="cannot use") as info:
        do_start(tmp_path / "file" / "sub")
    assert "--dir" in (info.value.hint or "")
    assert do_stop(tmp_path / "file" / "sub")["was_running"] is False


def test_a_daemon_that_dies_at_start_is_reported_at_once_with_its_log(tmp_path, monkeypatch):
    """A daemon that is gone is not waited for (the error says it exited, not that it
    gave no answer), and the error carries the log's end (a CI log keeps no state dir
    to look in)."""
    from clusterkit_sandbox import control
    monkeypatch.setattr(control, "DAEMON_MODULE", "clusterkit_sandbox.no_such_daemon")
    with pytest.raises(SandboxError, match=r"\(it exited; state dir") as info:
        do_start(tmp_path)
    assert "No module named clusterkit_sandbox.no_such_daemon" in str(info.value)
    assert str(tmp_path / "sandbox.log") in (info.value.hint or "")
