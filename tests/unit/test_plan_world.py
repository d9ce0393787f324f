"""plan.world: the observation a saved plan keeps survives JSON unchanged, and
``differences`` names each change between two observations (none: the plan holds)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.plan.world import DatasetSeen, Observed, StackSeen, differences
from clusterkit.spec import loads
from tests import support

SPEC = "name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [c5.large]}\n"


def _node(i: int, state: str = "running") -> Node:
    return Node(f"i-{i}", i, state, "c5.large", "us-east-1b", "spot", "us-east-1",
                "2026-11-26T09:00:00+00:00", price=0.04, tags=wanted_tags("t", i),
                volume_ids=(f"vol-{i}",))


def _observed() -> Observed:
    spec = loads(SPEC)
    seen = support.observed(spec, stack="CREATE_COMPLETE", nodes=[_node(0), _node(1)],
                            offers=[support.offer("c5.large", "spot", 0.04, az="us-east-1b")])
    return replace(seen, dataset=DatasetSeen("snap-0123456789abcdef0", 100, ("w",)),
                   subnets={"us-east-1b": "subnet-1"}, notes=("pinned: x",),
                   stack=replace(seen.stack, stack_id="arn:stack", outputs={"A": "b"}))


def test_json_round_trip_is_exact():
    seen = _observed()
    back = Observed.from_json(json.loads(json.dumps(seen.to_json())))
    assert back == seen
    assert differences(seen, back) == []


def test_an_observation_of_a_running_cluster_saves_again_once_read_back():
    """Read back, tags and stack parameters are read-only mappings (what survey_up
    holds for a cluster that exists): saving them again must not deep-copy them."""
    back = Observed.from_json(json.loads(json.dumps(_observed().to_json())))
    assert isinstance(back.nodes[0].tags, MappingProxyType)
    assert Observed.from_json(json.loads(json.dumps(back.to_json()))) == back


def test_offers_are_compared_only_when_the_new_observation_searched_them():
    """A cluster that runs has nothing to place: the offers it was not searched for are
    not "gone"."""
    seen = _observed()
    running = replace(seen, offers=(), regions=())
    assert differences(seen, running, seen.offers) == []


def test_differences_name_nodes_stack_facts_and_offers():
    seen = _observed()
    offer = seen.offers[0]
    now = replace(seen, nodes=(_node(0, "stopped"), _node(2)),
                  stack=StackSeen("UPDATE_IN_PROGRESS", {**seen.stack.parameters,
                                                         "ImageId": "ami-new"}),
                  facts=replace(seen.facts, image_id="ami-new"),
                  offers=(replace(offer, price=0.2),))
    out = differences(seen, now, seen.offers, ceiling=0.1)
    assert "node i-2 (t-worker-2) appeared, running" in out
    assert "node i-1 (t-worker-1) is gone" in out
    assert "node i-0 was running, is now stopped" in out
    assert "the stack was CREATE_COMPLETE, is now UPDATE_IN_PROGRESS" in out
    assert any(d.startswith("stack parameter ImageId was ") for d in out)
    assert any(d.startswith("image_id was ") for d in out)
    assert "offer c5.large spot in us-east-1b costs $0.2000/h, above the $0.1000/h " \
           "confirmed" in out
    assert differences(seen, replace(seen, offers=()), seen.offers) == [
        "offer c5.large spot in us-east-1b is gone"]
    cheaper = replace(seen, offers=(replace(offer, price=0.03),))
    assert differences(seen, cheaper, seen.offers, ceiling=0.04) == []  # a price may fall


def test_a_saved_plan_sees_the_clusters_instance_profiles_change():
    """The profiles `up` makes (plan.profiles) are part of the observation: they round
    trip, and one made, emptied or deleted since stops `up --plan` (not read: no say)."""
    seen = replace(_observed(), profiles={"clusterkit-t-us-east-1-node": ("r-node",)})
    back = Observed.from_json(json.loads(json.dumps(seen.to_json())))
    assert back == seen and differences(seen, back) == []
    now = replace(seen, profiles={"clusterkit-t-us-east-1-node": ()})
    assert differences(seen, now) == [
        "instance profile clusterkit-t-us-east-1-node held ['r-node'], now []"]
    assert differences(seen, replace(seen, profiles=None)) == []
