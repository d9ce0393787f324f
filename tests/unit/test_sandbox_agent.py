"""The node agent's bookkeeping without an emulator: instance views are built by hand."""

from __future__ import annotations

import json

from clusterkit.sandbox.agent import Agent, InstanceView
from clusterkit.sandbox.state import ADDRESSES_FILE

NO_ROOT = {"root": False, "ssh_nodes": False, "namespaces": False, "loop_devices": False,
           "md_raid": False, "not_emulated": ["SSH nodes: not emulated"]}


def _view(iid: str, state: str = "running") -> InstanceView:
    return InstanceView(iid, state, "c1", "ip-10-0-0-1", ["ssh-ed25519 AAAA k"], [], "us-east-1")


def test_node_that_cannot_be_emulated_is_marked_in_the_address_map(tmp_path):
    agent = Agent(tmp_path, NO_ROOT)
    agent._reconcile(_view("i-1"))
    assert agent.nodes["i-1"].state == "not emulated"
    entry = json.loads((tmp_path / ADDRESSES_FILE).read_text())["i-1"]
    assert entry["address"] == "127.0.0.2" and "not emulated" in entry["not_emulated"]
    # a restarted agent reads the marked map back as plain addresses
    again = Agent(tmp_path, NO_ROOT)
    assert again.addresses == {"i-1": "127.0.0.2"}
    again._reconcile(_view("i-2"))
    assert again.addresses["i-2"] == "127.0.0.3"


def test_terminated_unemulated_node_is_terminated(tmp_path):
    agent = Agent(tmp_path, NO_ROOT)
    agent._reconcile(_view("i-1"))
    agent._reconcile(_view("i-1", "terminated"))
    assert agent.nodes["i-1"].state == "terminated"
