"""Per-cluster known_hosts: merge, replace a changed key, non-22 ports, forget; only an
address and a key reach the files; two runs at once lose no pinned key."""

import os
import subprocess
import sys

import pytest

from clusterkit.errors import ClusterkitError
from clusterkit.remote import known_hosts
from tests.unit.test_spec_injection import PAYLOADS, payload_value


def test_record_merges_replaces_and_forgets(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    path = known_hosts.record("c1", {"127.0.0.2": "ssh-ed25519 AAAA1"})
    assert path == tmp_path / "clusters" / "c1" / "known_hosts"
    known_hosts.record("c1", {"127.0.0.3": "ssh-ed25519 AAAA2",
                              "127.0.0.2": "ssh-ed25519 NEWKEY"})
    assert path.read_text().splitlines() == ["127.0.0.2 ssh-ed25519 NEWKEY",
                                             "127.0.0.3 ssh-ed25519 AAAA2"]
    other = known_hosts.record("c2", {"127.0.0.9": "ssh-rsa BBBB"}, port=2222)
    assert other.read_text() == "[127.0.0.9]:2222 ssh-rsa BBBB\n"
    known_hosts.forget("c1")
    assert not path.exists() and other.exists()


# --- nothing but an address and a key reaches the files -----------------------------

def test_writers_refuse_anything_but_an_address_and_a_key(tmp_path, monkeypatch):
    """Each injection payload, as the address, the key and the instance id: refused
    before the lock is taken, and the files stay as they were."""
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    path = known_hosts.record("c", {"127.0.0.2": "ssh-ed25519 AAAA"})
    ids = known_hosts.record_instances("c", {"i-0123456789abcdef0": "ssh-ed25519 AAAA"})
    before = (path.read_text(), ids.read_text())
    attacks = [payload_value({"base": base}, name) for base in ("127.0.0.3", "ssh-ed25519 AAAA")
               for name in PAYLOADS] + ["* ssh-ed25519 AAAA", "@cert-authority *", "[a]:1 x"]
    for bad in attacks:
        with pytest.raises(ClusterkitError, match="refusing to write"):
            known_hosts.record("c", {bad: "ssh-ed25519 AAAA"})
        with pytest.raises(ClusterkitError, match="refusing to write"):
            known_hosts.record("c", {"127.0.0.3": bad})
        with pytest.raises(ClusterkitError, match="refusing to write"):
            known_hosts.record_instances("c", {bad: "ssh-ed25519 AAAA"})
        with pytest.raises(ClusterkitError, match="refusing to write"):
            known_hosts.record_instances("c", {"i-0123456789abcdef1": bad})
    assert (path.read_text(), ids.read_text()) == before
    assert known_hosts.record("c", {"node-1.example": "ssh-rsa AAAA/+0= comment"}).is_file()
    assert "node-1.example ssh-rsa AAAA/+0=\n" in path.read_text()  # comment dropped


_PIN = """
import sys
from clusterkit.remote import known_hosts
who, count = sys.argv[1], int(sys.argv[2])
sys.stdin.readline()  # both start together
for i in range(count):
    known_hosts.record_instances("race", {f"i-{who}{i:04d}": f"ssh-ed25519 AAAA{who}{i}"})
    known_hosts.record("race", {f"127.0.{ord(who) % 200}.{i + 1}": f"ssh-ed25519 AAAA{who}{i}"})
"""


def test_two_runs_pinning_at_once_lose_no_key(tmp_path):
    """Two processes record keys into the same files at the same moment: every key of
    both is there at the end (read-merge-write under the flock; unique temp names)."""
    env = {**os.environ, known_hosts.HOME_ENV: str(tmp_path)}
    count = 60
    runs = [subprocess.Popen([sys.executable, "-c", _PIN, who, str(count)], env=env,
                             stdin=subprocess.PIPE, text=True) for who in "ab"]
    for run in runs:
        run.stdin.write("go\n")
        run.stdin.flush()
    assert [run.wait(timeout=120) for run in runs] == [0, 0]
    os.environ[known_hosts.HOME_ENV] = str(tmp_path)
    try:
        ids = known_hosts.instance_keys("race")
        lines = known_hosts.known_hosts_path("race").read_text().splitlines()
    finally:
        del os.environ[known_hosts.HOME_ENV]
    assert len(ids) == 2 * count and len(lines) == 2 * count
    assert ids["i-a0000"] == "ssh-ed25519 AAAAa0" and ids["i-b0059"] == "ssh-ed25519 AAAAb59"
    leftovers = [p.name for p in (tmp_path / "clusters" / "race").iterdir()]
    assert sorted(leftovers) == [known_hosts.LOCK_FILE, "host_keys.json", "known_hosts"]
