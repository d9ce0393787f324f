"""The address hook: ssh_address() for direct and via-gateway connections, the sandbox
map, the net guard, and NotEmulated nodes."""

from __future__ import annotations

import json

import pytest

from clusterkit.errors import ClusterkitError, NetworkSafetyError, NotEmulated
from clusterkit.plan.nodes import Node
from clusterkit.remote.address import address_or_none, ssh_address, targets
from clusterkit.remote.probe import wait_reachable


def node(iid: str, public: str | None = None, private: str | None = None, *,
         index: int | None = 0, state: str = "running") -> Node:
    return Node(iid, index, state, "c5.large", "us-east-1a", "on-demand", "us-east-1",
                public_ip=public, private_ip=private)


INSTANCE = node("i-0abc", "203.0.113.3", "10.0.0.12")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    monkeypatch.delenv("CLUSTERKIT_ADDRESS_MAP", raising=False)


def test_via_gateway_is_the_private_ip_never_the_public_one():
    assert ssh_address(INSTANCE, via_gateway=True) == "10.0.0.12"
    assert ssh_address(INSTANCE) == "203.0.113.3"
    with pytest.raises(ClusterkitError, match="i-1"):
        ssh_address(node("i-1", "203.0.113.4"), via_gateway=True)


def test_via_gateway_map_wins_and_guard_applies(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text(json.dumps({"i-0abc": "127.0.0.5"}))
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    assert ssh_address(INSTANCE, via_gateway=True) == "127.0.0.5"
    table.write_text("{}")  # not in the map: the fake private IP is refused, not dialled
    with pytest.raises(NetworkSafetyError):
        ssh_address(INSTANCE, via_gateway=True)


def test_public_then_private():
    assert ssh_address(INSTANCE) == "203.0.113.3"
    assert ssh_address(node("i-1", private="10.0.0.7")) == "10.0.0.7"


def test_no_address_is_a_clear_error():
    with pytest.raises(ClusterkitError, match="i-9"):
        ssh_address(node("i-9"))


def test_address_or_none_shows_what_it_can():
    """For lists (status, up's result): an address where there is one, else None."""
    assert address_or_none(INSTANCE) == "203.0.113.3"
    assert address_or_none(INSTANCE, via_gateway=True) == "10.0.0.12"
    assert address_or_none(node("i-9")) is None


def test_map_wins(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text(json.dumps({"i-0abc": "127.0.0.5"}))
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    assert ssh_address(INSTANCE) == "127.0.0.5"


def test_sandbox_mode_refuses_fake_public_ip(tmp_path, monkeypatch):
    """An instance missing from the map falls back to its (fake) public IP: refused."""
    table = tmp_path / "addresses.json"
    table.write_text("{}")
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(NetworkSafetyError, match="203.0.113.3"):
        ssh_address(INSTANCE)


def test_corrupt_map_is_reported(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text("{not json")
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    with pytest.raises(ClusterkitError, match="address map"):
        ssh_address(INSTANCE)


def _unemulated_map(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text(json.dumps({"i-0abc": {"address": "127.0.0.5",
                                            "not_emulated": "SSH node not emulated here"}}))
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")


def test_node_the_sandbox_cannot_run_is_not_emulated(tmp_path, monkeypatch):
    _unemulated_map(tmp_path, monkeypatch)
    with pytest.raises(NotEmulated, match="i-0abc: SSH node not emulated") as info:
        ssh_address(INSTANCE)
    assert info.value.exit_code == 1 and "sandbox status" in (info.value.hint or "")


def test_waiting_for_ssh_stops_at_once_on_not_emulated(tmp_path, monkeypatch):
    """No timeout to sit out: wait_reachable passes NotEmulated straight up."""
    _unemulated_map(tmp_path, monkeypatch)
    ticks = iter(range(1000))
    with pytest.raises(NotEmulated):
        wait_reachable([INSTANCE], port=22, deadline=500, interval=0,
                       clock=lambda: next(ticks))
    assert next(ticks) < 5


def test_targets_dial_the_master_directly_and_workers_through_it():
    nodes = [node("i-m", "203.0.113.3", "10.0.0.1"), node("i-w", "203.0.113.4", "10.0.0.2", index=1)]
    master, worker = targets(nodes, nodes)
    assert (master.node, master.hop.address, master.via) == (nodes[0], "203.0.113.3", None)
    assert (worker.node, worker.hop.address, worker.via) == (nodes[1], "10.0.0.2", master.hop)
    stopped = [node("i-m", "203.0.113.3", state="stopped"), nodes[1]]
    with pytest.raises(ClusterkitError, match="no running master"):
        targets(stopped, stopped[1:])
