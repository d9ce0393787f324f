"""Node selectors of `exec --node` / `ssh NODE`: index, role, instance id, Name tag."""

import pytest

from clusterkit.errors import UsageError
from clusterkit.plan.nodes import Node
from clusterkit.remote.selection import gateway, labels, select, select_one


def node(index, iid=None, name=None):
    tags = {"Name": name if name is not None else f"c-{'master' if index == 0 else 'worker'}-"
            f"{index}"}
    return Node(instance_id=iid or f"i-{index}", index=index, state="running",
                instance_type="c5.large", az="us-east-1a", market="on-demand",
                region="us-east-1", tags=tags)


NODES = [node(2), node(0), node(1)]


def ids(nodes):
    return [n.instance_id for n in nodes]


def test_no_selector_is_every_node_master_first():
    assert ids(select(NODES)) == ["i-0", "i-1", "i-2"]


@pytest.mark.parametrize("selectors,expected", [
    (["0"], ["i-0"]), (["2"], ["i-2"]), (["master"], ["i-0"]),
    (["worker"], ["i-1", "i-2"]), (["workers"], ["i-1", "i-2"]),
    (["i-1"], ["i-1"]), (["c-worker-2"], ["i-2"]),
    (["2", "0", "i-2", "c-master-0"], ["i-0", "i-2"]),  # each once, master first
    ([" 1 "], ["i-1"]),
])
def test_selectors(selectors, expected):
    assert ids(select(NODES, selectors)) == expected


def test_unknown_selector_lists_the_nodes():
    with pytest.raises(UsageError) as caught:
        select(NODES, ["7"])
    assert "no node '7'" in caught.value.message
    assert "0=c-master-0, 1=c-worker-1, 2=c-worker-2" in caught.value.hint
    assert caught.value.exit_code == 2
    with pytest.raises(UsageError):
        select(NODES, ["i-nope"])


def test_select_one_defaults_to_master_and_refuses_ambiguity():
    assert select_one(NODES, None).instance_id == "i-0"
    assert select_one(NODES, "1").instance_id == "i-1"
    with pytest.raises(UsageError, match="names 2 nodes"):
        select_one(NODES, "worker")


def test_untagged_node_by_id_only_and_last():
    stray = Node(instance_id="i-x", index=None, state="running", instance_type="c5.large",
                 az="a", market="spot", region="r", tags={})
    assert ids(select([stray, *NODES])) == ["i-0", "i-1", "i-2", "i-x"]
    assert ids(select([stray, *NODES], ["worker"])) == ["i-1", "i-2"]
    assert ids(select([stray, *NODES], ["i-x"])) == ["i-x"]
    assert labels([stray])["i-x"] == "i-x"


def test_labels_are_unique_names_else_ids():
    twins = [node(1, "i-a", "c-node"), node(2, "i-b", "c-node"), node(0)]
    assert labels(twins) == {"i-a": "i-a", "i-b": "i-b", "i-0": "c-master-0"}


def test_gateway_is_index_zero():
    assert gateway(NODES).instance_id == "i-0"
    assert gateway([node(1)]) is None
