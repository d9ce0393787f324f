"""cluster/jobs/retire.py's shell, run here by bash against a fake $HOME (as far as it
needs no node): the controller's key taken off ``authorized_keys`` and nothing else, and
`down`'s stop of a controller that holds its lock (TERM, waited for until the lock is
free; KILL for one that ignores TERM; nothing when none runs). The controller here is a
stand-in process that takes the lock and writes its ready file as the real one does
(the real one, on a sandbox node, is tests/e2e/test_controller_down.py's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterkit.cluster.jobs import controller, controller_daemon, retire

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIcontroller clusterkit-controller@master"


def _env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ["PATH"]}


def test_unauthorize_takes_off_the_controllers_key_only(tmp_path):
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.parent.mkdir()
    others = ["ssh-ed25519 AAAAuser me@laptop", f"{KEY} extra", "ssh-rsa AAAAother x"]
    keys.write_text("\n".join([others[0], KEY, *others[1:], KEY]) + "\n")
    keys.chmod(0o600)
    for _ in range(2):  # again: nothing left to take off, nothing else touched
        subprocess.run(["bash", "-c", retire.UNAUTHORIZE], input=(KEY + "\n").encode(),
                       env=_env(tmp_path), check=True)
        assert keys.read_text().splitlines() == others
        assert keys.stat().st_mode & 0o777 == 0o600
    assert not list(keys.parent.glob("*.ck-new"))
    bare = tmp_path / "bare"  # a node with no authorized_keys at all
    subprocess.run(["bash", "-c", retire.UNAUTHORIZE], input=(KEY + "\n").encode(),
                   env=_env(bare), check=True)
    assert not (bare / ".ssh").exists()


STAND_IN = """
import fcntl, json, os, signal, sys, time
d = sys.argv[1]
lock = open(os.path.join(d, "lock"), "a")
fcntl.flock(lock, fcntl.LOCK_EX)
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *a: (open(os.path.join(d, "retired"), "w"), sys.exit(0)))
with open(os.path.join(d, "ready"), "w") as f:
    f.write(json.dumps({"pid": os.getpid(), "job_id": "j1"}) + "\\n")
while True:
    time.sleep(0.1)
"""


def _controller(home: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    where = home / ".clusterkit" / "controller"
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", STAND_IN, str(where), mode])
    while not (where / controller.READY).exists():
        assert proc.poll() is None
        time.sleep(0.05)
    return proc, where


@pytest.mark.parametrize("mode, said", [("retire", "stopped"), ("ignore", "killed")])
def test_stop_ends_the_controller_that_holds_the_lock(tmp_path, mode, said):
    proc, where = _controller(tmp_path, mode)
    try:
        got = subprocess.run(["bash", "-c", retire.stop_command(wait=1, private=str(where))],
                             env=_env(tmp_path), capture_output=True, text=True, check=True)
        assert got.stdout.strip() == said, got
        proc.wait(10)
        assert (where / "retired").exists() is (mode == "retire")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_with_no_controller_running_does_nothing(tmp_path):
    for prepare in (lambda: None, lambda: (tmp_path / ".clusterkit/controller").mkdir(
            parents=True), lambda: (tmp_path / ".clusterkit/controller/lock").touch()):
        prepare()
        where = tmp_path / ".clusterkit/controller"
        got = subprocess.run(["bash", "-c", retire.stop_command(wait=1, private=str(where))],
                             env=_env(tmp_path), capture_output=True, text=True, check=True)
        assert got.stdout.strip() == "none"


def test_term_unwinds_the_controller_once():
    """TERM raises SystemExit (so `run`'s finally retires); a second TERM meanwhile is
    ignored, not a second unwinding in the middle of the retirement."""
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as ended:
            controller_daemon._terminated(signal.SIGTERM, None)
        assert ended.value.code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_settings_carry_what_the_controller_gives_back(monkeypatch):
    """The master's node profile and id reach the controller (retire gives it back)."""
    from types import SimpleNamespace

    outputs = {"InstanceProfileArn": "arn:node", "ControllerProfileArn": "arn:ctl"}
    monkeypatch.setattr(controller.aws_stack, "stack_record", lambda *a: {
        "status": "CREATE_COMPLETE", "parameters": {"SshCidr": "203.0.113.7/32"},
        "outputs": outputs})
    jc = SimpleNamespace(name="c1", master=SimpleNamespace(node=SimpleNamespace(
        instance_id="i-0master")))
    values = controller.settings(SimpleNamespace(session=None), jc, "j1", 1, "us-east-1", None)
    assert (values["profile"], values["node_profile"], values["master_instance_id"]) == (
        "arn:ctl", "arn:node", "i-0master")
    json.dumps(values)
