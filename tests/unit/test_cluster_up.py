"""`up` records each node's host key under the address you dial and the one the master
dials (its private IP), so `exec`/`ssh` check both hops strictly."""

from __future__ import annotations

from types import SimpleNamespace

from clusterkit.cluster.provision.reach import record_host_keys
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts
from clusterkit.spec.model import Ssh


def _node(index: int, public: str, private: str) -> Node:
    return Node(instance_id=f"i-{index}", index=index, state="running",
                instance_type="c5.large", az="a", market="spot", region="r",
                public_ip=public, private_ip=private)


def test_host_keys_recorded_under_public_and_private_address(tmp_path, monkeypatch):
    for var in ("CLUSTERKIT_SANDBOX", "CLUSTERKIT_ADDRESS_MAP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    spec = SimpleNamespace(name="c1", ssh=Ssh())  # the two fields this step reads
    nodes = [_node(0, "203.0.113.11", "10.0.0.1"), _node(1, "203.0.113.12", "10.0.0.2")]
    known = record_host_keys(spec, nodes,  # type: ignore[arg-type]
                             {"i-0": "ssh-ed25519 K0", "i-1": "ssh-ed25519 K1"})
    assert known == known_hosts.known_hosts_path("c1")
    assert known_hosts.known_hosts_path("c1").read_text().splitlines() == [
        "10.0.0.1 ssh-ed25519 K0", "10.0.0.2 ssh-ed25519 K1",
        "203.0.113.11 ssh-ed25519 K0", "203.0.113.12 ssh-ed25519 K1"]


def test_no_probed_key_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    spec = SimpleNamespace(name="c2", ssh=Ssh())
    assert record_host_keys(spec, [_node(0, "203.0.113.11", "10.0.0.1")], {}) is None  # type: ignore[arg-type]
    assert not known_hosts.known_hosts_path("c2").exists()


def test_a_stack_in_progress_refuses_before_anything_is_asked_or_changed():
    """Another machine's `up` (or `down`) shows as the cluster's stack *_IN_PROGRESS.
    moto finishes every stack at once, so the observation is given here."""
    import pytest

    from clusterkit.cluster.provision import up
    from clusterkit.errors import ClusterBusyError
    from clusterkit.spec import loads
    from tests import support

    spec = loads("name: busy\nregion: us-east-1\nnodes: {instance_types: [c5.large]}\n")
    with pytest.raises(ClusterBusyError) as caught:
        up.refuse_busy(spec, support.observed(spec, stack="CREATE_IN_PROGRESS"))
    assert caught.value.exit_code == 1
    assert caught.value.message.startswith("the stack of cluster busy in us-east-1 is "
                                           "CREATE_IN_PROGRESS: another `up` or `down`")
    assert "nothing was changed" in caught.value.hint and "down" not in caught.value.hint
    up.refuse_busy(spec, support.observed(spec, stack="CREATE_COMPLETE"))  # not busy
