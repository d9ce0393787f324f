"""Host keys per instance id (remote.known_hosts + cluster.hostkeys): a new instance id
is recorded, the same id with a different key is refused with both fingerprints and a
per-node accept flag, and known_hosts is written from the records for the nodes'
current addresses. Real keys from ssh-keygen; no network (each instance's console is
given as text: here it prints every test key, so first contact always matches; the
console checks themselves are in test_cluster_firstcontact.py)."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from clusterkit import statedir
from clusterkit.cluster.access import hostkeys
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import RemoteError
from clusterkit.events import Collect, Kind
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.remote import known_hosts
from clusterkit.remote.connect import Hop, Login, describe
from tests import support


def _key(where: Path, name: str) -> str:
    return support.public_key(support.ssh_keygen(where / name))


def node(iid: str, index: int, public: str, private: str) -> Node:
    return Node(iid, index, "running", "c5.large", "us-east-1a", "on-demand", "us-east-1",
                public_ip=public, private_ip=private, tags=wanted_tags("hk", index))


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv(statedir.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv("CLUSTERKIT_ADDRESS_MAP", raising=False)
    keys = {n: _key(tmp_path, n) for n in ("a", "b", "c", "d")}
    rt = Runtime(session=None, report=Collect())
    return rt, keys


def record(rt: Runtime, keys: dict[str, str], *args, **kwargs) -> None:
    """check_and_record with consoles that print every test key."""
    printed = ("-----BEGIN SSH HOST KEY KEYS-----\n" + "\n".join(keys.values())
               + "\n-----END SSH HOST KEY KEYS-----\n")
    hostkeys.check_and_record(rt, *args, console=lambda node: printed, **kwargs)


def _known(cluster: str) -> dict[str, str]:
    lines = known_hosts.known_hosts_path(cluster).read_text().splitlines()
    return dict(line.split(" ", 1) for line in lines)


def test_fingerprint_is_openssh_sha256(tmp_path):
    key = _key(tmp_path, "k")
    assert known_hosts.fingerprint(key) == support.fingerprint(tmp_path / "k")


def test_first_contact_records_per_instance_and_both_addresses(env):
    rt, keys = env
    nodes = [node("i-0", 0, "127.0.0.2", "127.0.1.2"), node("i-1", 1, "127.0.0.3", "127.0.1.3")]
    record(rt, keys, "hk", nodes, {"i-0": keys["a"], "i-1": keys["b"]})
    assert known_hosts.instance_keys("hk") == {"i-0": keys["a"], "i-1": keys["b"]}
    assert _known("hk") == {"127.0.0.2": keys["a"], "127.0.1.2": keys["a"],
                            "127.0.0.3": keys["b"], "127.0.1.3": keys["b"]}


def test_same_instance_new_key_is_refused_with_both_fingerprints(env):
    rt, keys = env
    nodes = [node("i-0", 0, "127.0.0.2", "127.0.1.2"), node("i-1", 1, "127.0.0.3", "127.0.1.3")]
    record(rt, keys, "hk", nodes, {"i-0": keys["a"], "i-1": keys["b"]})
    new_node = node("i-2", 2, "127.0.0.4", "127.0.1.4")
    with pytest.raises(RemoteError) as err:
        record(rt, keys, "hk", [*nodes, new_node],
                                  {"i-0": keys["a"], "i-1": keys["c"], "i-2": keys["d"]})
    msg, hint = err.value.message, err.value.hint or ""
    assert known_hosts.fingerprint(keys["b"]) in msg and known_hosts.fingerprint(keys["c"]) in msg
    assert "hk-worker-1 (i-1)" in msg and "hk-master" not in msg
    assert "--accept-new-host-key hk-worker-1" in hint
    assert "clusterkit up" not in hint and "run up" not in hint
    recorded = known_hosts.instance_keys("hk")
    assert recorded["i-1"] == keys["b"]  # the changed key is not recorded...
    assert recorded["i-2"] == keys["d"]  # ...a new instance's is
    assert _known("hk")["127.0.0.3"] == keys["b"]


def test_accepting_one_node_records_its_new_key_only(env):
    rt, keys = env
    nodes = [node("i-0", 0, "127.0.0.2", "127.0.1.2"), node("i-1", 1, "127.0.0.3", "127.0.1.3")]
    record(rt, keys, "hk", nodes, {"i-0": keys["a"], "i-1": keys["b"]})
    with pytest.raises(RemoteError, match="i-0"):  # master changed too: not accepted
        record(rt, keys, "hk", nodes, {"i-0": keys["c"], "i-1": keys["d"]},
                                  accept=["worker-1"])
    assert known_hosts.instance_keys("hk") == {"i-0": keys["a"], "i-1": keys["d"]}
    record(rt, keys, "hk", nodes, {"i-0": keys["c"]}, accept=["0"])
    assert known_hosts.instance_keys("hk")["i-0"] == keys["c"]
    warned = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert [w.split(" (")[0] for w in warned] == ["accepted the new host key of hk-worker-1",
                                                  "accepted the new host key of hk-master-0"]
    assert _known("hk")["127.0.0.2"] == keys["c"]


def test_new_instance_at_a_reused_address_and_moved_address(env):
    """An address is not an identity: a new instance at an old address is recorded, and a
    node that comes back (stop/start) at a new address keeps its recorded key."""
    rt, keys = env
    first = node("i-0", 0, "127.0.0.2", "127.0.1.2")
    record(rt, keys, "hk", [first], {"i-0": keys["a"]})
    replaced = node("i-9", 0, "127.0.0.2", "127.0.1.2")
    record(rt, keys, "hk", [replaced], {"i-9": keys["b"]})
    assert _known("hk")["127.0.0.2"] == keys["b"]
    moved = node("i-9", 0, "127.0.0.7", "127.0.1.7")
    record(rt, keys, "hk", [moved], {})  # no probe: `up --no-wait-ssh`
    assert _known("hk")["127.0.0.7"] == keys["b"]


def test_bad_host_key_from_the_ssh_client_shows_both_fingerprints():
    recorded, presented = paramiko.RSAKey.generate(1024), paramiko.RSAKey.generate(1024)
    err = describe(paramiko.BadHostKeyException("127.0.0.3", presented, recorded),
                   Login("hk"), Hop("hk-worker-1", "127.0.0.3"))
    for key in (recorded, presented):
        assert known_hosts.fingerprint(f"{key.get_name()} {key.get_base64()}") in err.message
    assert "--accept-new-host-key hk-worker-1" in (err.hint or "")
    assert "clusterkit up" not in (err.hint or "")
