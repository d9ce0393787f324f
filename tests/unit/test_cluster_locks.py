"""cluster.locks: one `up` or `down` of a cluster at a time on this machine, across
processes (flock), the holder named to the second; other clusters are not held up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit.cluster.provision.locks import cluster_lock
from clusterkit.errors import ClusterkitError, UsageError

HOLD = """
import sys, time
from clusterkit.cluster.provision.locks import cluster_lock
with cluster_lock(sys.argv[1], "up"):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_second_command_on_a_busy_cluster_is_refused_naming_the_first(state: Path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "busy"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ClusterkitError) as caught, cluster_lock("busy", "down"):
            pass
        assert caught.value.exit_code == 1
        assert caught.value.message == (f"cluster busy is busy: `clusterkit up` (pid "
                                        f"{holder.pid}) is in progress on this machine")
        assert "then run `clusterkit down` again; nothing was changed" in caught.value.hint
        with cluster_lock("other", "up"):  # another cluster is not held up
            pass
    finally:
        holder.communicate("")
    with cluster_lock("busy", "down"):  # the first ended: free again
        pass
    assert oct((state / "locks").stat().st_mode & 0o777) == "0o700"
    assert oct((state / "locks" / "busy.lock").stat().st_mode & 0o777) == "0o600"


def test_a_name_is_checked_before_it_becomes_a_path():
    with pytest.raises(UsageError), cluster_lock("../../etc/passwd", "up"):
        pass
