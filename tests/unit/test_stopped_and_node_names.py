"""Stopped nodes are started, not replaced (plan.nodes ``start``), and nodes are named
by index (``2``) or name (``worker-2``, ``master``) everywhere a NODE is taken."""

from __future__ import annotations

import pytest

from clusterkit.errors import UsageError
from clusterkit.plan.nodes import Node, node_actions, wanted_tags
from clusterkit.remote import selection


def node(iid: str, index: int, state: str = "running") -> Node:
    return Node(iid, index, state, "c5.large", "us-east-1a", "on-demand", "us-east-1",
                f"2026-01-01T00:00:0{index}+00:00", tags=wanted_tags("c", index))


def test_stopped_nodes_are_started_not_launched_again():
    nodes = [node("i-0", 0), node("i-1", 1, "stopped"), node("i-2", 2, "stopping")]
    actions = node_actions("c", 3, nodes)
    assert actions.start == ("i-1", "i-2")
    assert actions.launch == () and actions.terminate == ()
    assert not actions.empty


def test_a_running_cluster_starts_nothing():
    actions = node_actions("c", 2, [node("i-0", 0), node("i-1", 1)])
    assert actions.start == () and actions.empty


def test_surplus_stopped_node_is_terminated_not_started():
    actions = node_actions("c", 1, [node("i-0", 0), node("i-1", 1, "stopped")])
    assert actions.terminate == ("i-1",) and actions.start == ()


@pytest.mark.parametrize("selector, expected", [
    ("2", ["i-2"]), ("worker-2", ["i-2"]), ("master", ["i-0"]), ("master-0", ["i-0"]),
    ("0", ["i-0"]), ("c-worker-1", ["i-1"]), ("worker", ["i-1", "i-2"]),
])
def test_node_by_index_or_name(selector, expected):
    nodes = [node("i-0", 0), node("i-1", 1), node("i-2", 2)]
    assert [n.instance_id for n in selection.select(nodes, [selector])] == expected


def test_unknown_node_name_lists_the_nodes():
    nodes = [node("i-0", 0), node("i-1", 1)]
    with pytest.raises(UsageError) as err:
        selection.select(nodes, ["worker-5"])
    assert "worker-2" in err.value.hint and "1=c-worker-1" in err.value.hint
