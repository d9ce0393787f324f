"""The node agent's bookkeeping without an emulator: instance views are built by hand."""

from __future__ import annotations

import json

from clusterkit_sandbox.agent import Agent, InstanceView
from clusterkit_sandbox.state import ADDRESSES_FILE

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


def test_a_nodes_power_off_request_ends_its_instance_as_its_behaviour_says(tmp_path,
                                                                            monkeypatch):
    """The shim in a node writes run/power/<instance id>; the agent ends that instance
    (moto_models.shut_down_by_os, faked here), notes it, and ignores a request for an
    instance it does not run."""
    from clusterkit_sandbox import agent as agent_module

    ended: list[str] = []
    monkeypatch.setattr(agent_module, "shut_down_by_os",
                        lambda iid: ended.append(iid) or "terminate")
    agent = Agent(tmp_path, NO_ROOT)
    agent._reconcile(_view("i-1"))
    agent.nodes["i-1"].state = "ready"
    (agent.power_dir / "i-1").write_text("shutdown -h now\n")
    (agent.power_dir / "i-9").write_text("poweroff\n")  # no such node
    (agent.power_dir / "i-1.tmp").write_text("half written")
    agent._power_offs()
    assert ended == ["i-1"]
    assert sorted(p.name for p in agent.power_dir.iterdir()) == ["i-1.tmp"]
    [line] = (tmp_path / agent_module.POWER_LOG).read_text().splitlines()
    record = json.loads(line)
    assert (record["instance_id"], record["command"], record["action"]) == \
        ("i-1", "shutdown -h now", "terminate")


def test_the_power_shims_are_written_into_the_nodes_own_root(tmp_path):
    """shutdown / poweroff / halt in the node's upper layer of /usr (never the host's):
    what a node's `shutdown -h now` runs."""
    from clusterkit_sandbox import node

    spec = node.NodeSpec("i-1", "127.0.0.9", "ip-10-0-0-9", ["ssh-ed25519 AAAA k"],
                         tmp_path / "n", tmp_path / "efs", namespaces=False)
    node._first_boot_root(spec)
    for command in node.POWER_COMMANDS:
        shim = tmp_path / "n" / "layers" / "usr" / "upper" / "sbin" / command
        assert shim.read_text() == node.POWER_SHIM and shim.stat().st_mode & 0o111
    assert node.POWER_IN_NODE in node.POWER_SHIM and "@POWER@" not in node.POWER_SHIM
    assert f"mount --bind {tmp_path / 'power'} " in node.boot_script(spec)
