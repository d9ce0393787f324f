"""The `sandbox` and `sandbox_cluster` fixtures clean up even when the test using them
fails: an inner pytest run (its own sandbox, real sshd node with loop-backed instance
store) fails on purpose; afterwards no process, mount, loop device or state is left."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit_sandbox import disks
from clusterkit_sandbox.control import mounts_under

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
REPO = Path(__file__).parents[2]

INNER = '''
import json, os
from pathlib import Path

def test_fails_with_a_node_up(sandbox_cluster):
    (node,) = sandbox_cluster.launch(1, instance_type="c5d.large")
    record = sandbox_cluster.sandbox.nodes()[node.instance_id]
    assert record["instance_store"], record  # loop devices exist while it runs
    Path(os.environ["CK_OUT"]).write_text(json.dumps(
        {"dir": str(sandbox_cluster.sandbox.dir), "address": node.address,
         "pid": record["pid"]}))
    assert sandbox_cluster.run(node, "hostname").stdout.strip() == node.hostname
    raise AssertionError("deliberate failure")
'''


def _ssh_open(address: str) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, 22)) == 0


def test_fixtures_clean_up_after_a_failing_test(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    out_file = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO),
         "--basetemp", str(tmp_path / "inner"), str(tmp_path / "test_inner.py")],
        cwd=REPO, env={**os.environ, "CK_OUT": str(out_file)}, capture_output=True, text=True,
        timeout=120)
    summary = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in summary and "error" not in summary, proc.stdout
    assert "deliberate failure" in proc.stdout
    seen = json.loads(out_file.read_text())
    where = Path(seen["dir"])
    assert not (where / "state.json").exists()
    assert not (where / "run").exists()
    assert not _ssh_open(seen["address"])
    assert not Path(f"/proc/{seen['pid']}").exists()
    assert disks.loops_under(where) == []
    assert mounts_under(where) == []
    leftover = subprocess.run(["pgrep", "-f", str(where)], capture_output=True, text=True)
    assert leftover.returncode == 1 and leftover.stdout == ""  # 1: no process matched
