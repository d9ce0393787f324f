"""plan/autostop.py: the shutdown behaviour each node needs, which nodes to change, the
clock `status` shows, and what an autostopped cluster still costs."""

from __future__ import annotations

import pytest

from clusterkit.kinds import Market
from clusterkit.plan import autostop
from clusterkit.plan.autostop import Remains, Volume, clock_of
from clusterkit.plan.nodes import Node


def node(iid: str, market: Market = Market.ON_DEMAND, tag: str | None = None,
         state: str = "running") -> Node:
    tags = {autostop.SHUTDOWN_TAG: tag} if tag else {}
    return Node(iid, 0, state, "c5.large", "us-east-1a", market, "us-east-1", tags=tags)


def test_spot_nodes_always_terminate() -> None:
    assert autostop.behaviour_for(Market.SPOT, "stop") == "terminate"
    assert autostop.behaviour_for(Market.ON_DEMAND, "stop") == "stop"
    assert autostop.current_behaviour(node("i-1", Market.SPOT)) == "terminate"


def test_only_nodes_whose_behaviour_differs_are_changed() -> None:
    nodes = [node("i-1"), node("i-2", tag="terminate"), node("i-3", Market.SPOT),
             node("i-4", tag="stop"), node("i-5", state="terminated")]
    # untagged on-demand nodes do what EC2 does by default: stop
    assert autostop.to_change(nodes, "terminate") == ["i-1", "i-4"]
    assert autostop.to_change(nodes, "stop") == ["i-2"]
    assert autostop.to_change([node("i-2", tag="terminate")], "terminate") == []


def test_the_clock_of_the_masters_answer() -> None:
    answer = {"running": True, "now": 1100.0, "state": {
        "idle_s": 1800, "action": "stop", "last_activity": 1000.0, "decided": None,
        "reason": "job j-1 running"}}
    clock = clock_of(answer)
    assert clock is not None and (clock.left_s, clock.last_activity_ago_s) == (1700.0, 100.0)
    assert clock.describe() == ("autostop: stop after 30m idle: 28m20s left (last activity "
                                "1m40s ago: job j-1 running)")
    decided = clock_of({**answer, "state": {**answer["state"], "decided": 2800.0}})
    assert decided is not None and decided.deciding and decided.left_s == 0.0
    assert "shutting down now" in decided.describe()
    assert clock_of({"installed": False}) is None
    assert clock_of(None) is None
    assert clock_of({"running": False, "now": 1.0, "state": None}) is None  # turned off
    assert clock_of({"running": True, "now": 1.0, "state": None}).describe() == \
        "autostop: off"  # just started: no clock written yet


def test_what_is_left_and_its_cost() -> None:
    left = Remains(True, "clusterkit-demo", stopped=("i-1",), terminated=(),
                   volumes=(Volume("vol-1", 100, "gp3", ("i-1",)),),
                   efs=({"id": "fs-1", "size_gb": 10.0, "usd_per_month": 3.0},))
    assert left.usd_per_month == pytest.approx(11.0)
    text = "\n".join(left.lines("demo"))
    assert "cluster demo autostopped" in text and "vol-1: 100 GiB gp3, $8.00/month" in text
    assert "$11.00/month" in text and "`clusterkit down demo`" in text
    assert left.to_json()["usd_per_month"] == pytest.approx(11.0)
    assert not autostop.autostopped(["Client.UserInitiatedShutdown", None])
    assert autostop.autostopped(["", autostop.OS_SHUTDOWN_CODE])


def _spec(autostop_yaml: str, market: str = "on-demand"):
    from clusterkit.spec import loads

    return loads("name: demo\nregion: us-east-1\nnodes:\n  instance_types: [c5.large]\n"
                 f"  market: {market}\n{autostop_yaml}")


def test_a_launch_carries_the_shutdown_behaviour_and_its_tag() -> None:
    from clusterkit.catalog.ranking import Offer
    from clusterkit.plan.launch import launch_request

    on_demand = Offer("c5.large", "us-east-1", "us-east-1a", None, Market.ON_DEMAND, 0.085,
                      0.085, 0)
    spot = Offer("c5.large", "us-east-1", "us-east-1a", None, Market.SPOT, 0.03, 0.085, 0)
    stop = launch_request(_spec("autostop: {idle: 1h, action: stop}\n"), on_demand, [0], "s")
    assert stop.shutdown_behavior == "stop" and stop.tags[autostop.SHUTDOWN_TAG] == "stop"
    assert autostop.SHUTDOWN_TAG not in stop.volume_tags
    mixed = _spec("autostop: {idle: 1h, action: stop}\n", "spot-then-on-demand")
    assert launch_request(mixed, spot, [0], "s").shutdown_behavior == "terminate"
    for text in ("", "autostop: off\n"):
        plain = launch_request(_spec(text), on_demand, [0], "s")
        assert plain.shutdown_behavior is None and autostop.SHUTDOWN_TAG not in plain.tags


@pytest.mark.parametrize(("text", "idle_s", "action"), [
    ("autostop: 20s\n", 20, "terminate"), ("autostop: off\n", None, "terminate"),
    ("autostop: false\n", None, "terminate"), ("autostop: 'off'\n", None, "terminate"),
    ("autostop:\n", 1800, "terminate"), ("autostop: {idle: 2h, action: stop}\n", 7200, "stop"),
    ("autostop:\n  action: stop\n", 1800, "stop")])
def test_the_spec_key_and_its_shorthand(text: str, idle_s: int | None, action: str) -> None:
    import jsonschema
    import yaml

    from clusterkit.spec.schema import json_schema

    spec = _spec(text)
    assert spec.autostop is not None
    assert (spec.autostop.idle_s, spec.autostop.action) == (idle_s, action)
    doc = yaml.safe_load("name: demo\nregion: us-east-1\nnodes:\n  instance_types: "
                         f"[c5.large]\n{text}")
    jsonschema.validate(doc, json_schema())  # the schema takes every form the walk takes
    assert _spec("").autostop is None
