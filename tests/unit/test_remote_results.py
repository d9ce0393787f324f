"""Fan-out results (Fabric's GroupResult / GroupException shape): one NodeResult per
node, the group's succeeded / failed views, and one GroupError that keeps them all."""

from __future__ import annotations

import json

import pytest

from clusterkit.cli.render import error_json
from clusterkit.errors import GroupError, RemoteError
from clusterkit.plan.nodes import Node
from clusterkit.remote.results import GroupResult, NodeResult


def _result(index: int, **fields) -> NodeResult:
    node = Node(f"i-{index}", index, "running", "c5.large", "a", "spot", "r")
    label = "master" if index == 0 else f"worker-{index}"
    via = None if index == 0 else "10.0.0.1"
    return NodeResult(node, label, f"10.0.0.{index + 1}", via, **fields)


GROUP = GroupResult([
    _result(0, exit_code=0, stdout="ok\n", seconds=0.1),
    _result(1, exit_code=3, stderr="boom\n", seconds=0.2),
    _result(2, error="timed out after 1 s", hint="raise --timeout", seconds=1.0),
    _result(3, error="cannot connect", hint="is the node running?"),
])


def test_node_result_ok_only_when_it_ran_and_exited_zero():
    assert [r.ok for r in GROUP.values()] == [True, False, False, False]
    assert [r.reason for r in GROUP.values()][1:] == [
        "exit 3", "timed out after 1 s", "cannot connect"]
    assert _result(0, exit_code=0, error="timed out").ok is False
    with pytest.raises(AttributeError):
        GROUP["master"].exit_code = 1  # type: ignore[misc]


def test_group_keeps_node_order_and_splits_succeeded_from_failed():
    assert list(GROUP) == ["master", "worker-1", "worker-2", "worker-3"] and len(GROUP) == 4
    assert list(GROUP.succeeded) == ["master"]
    assert list(GROUP.failed) == ["worker-1", "worker-2", "worker-3"]
    assert not GROUP.ok and GroupResult([GROUP["master"]]).ok
    assert GroupResult().ok and not GroupResult().failed


def test_json_form_is_the_exec_shape():
    data = GROUP.as_dict()
    assert list(data["master"]) == ["index", "role", "instance_id", "address", "via", "ok",
                                    "exit_code", "stdout", "stderr", "error", "hint",
                                    "seconds"]
    assert data["worker-1"] == {
        "index": 1, "role": "worker", "instance_id": "i-1", "address": "10.0.0.2",
        "via": "10.0.0.1", "ok": False, "exit_code": 3, "stdout": "", "stderr": "boom\n",
        "error": None, "hint": None, "seconds": 0.2}
    assert json.loads(json.dumps(data)) == data


def test_group_error_carries_every_result_and_names_each_failure():
    err = GroupError(GROUP)
    assert isinstance(err, RemoteError) and err.exit_code == 1
    assert err.group is GROUP and err.group.succeeded["master"].stdout == "ok\n"
    assert err.message == ("command failed on 3 of 4 node(s): worker-1 (exit 3); "
                           "worker-2 (timed out after 1 s); worker-3 (cannot connect)")
    assert err.hint == "raise --timeout / is the node running?"  # each hint once
    data = error_json(err.message, err.hint, err.exit_code, err)
    assert data["results"] == GROUP.as_dict()  # --json: partial success is never lost


def test_group_error_without_hints_points_at_the_output():
    err = GroupError(GroupResult([_result(0, exit_code=0), _result(1, exit_code=1)]))
    assert err.message == "command failed on 1 of 2 node(s): worker-1 (exit 1)"
    assert "--json prints every node's result" in (err.hint or "")
