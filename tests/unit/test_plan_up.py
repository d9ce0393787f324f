"""plan.up and plan.cost: the plan as data and lines, $/h and cost so far."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clusterkit.errors import ClusterkitError
from clusterkit.plan.cost import cluster_hourly, hours_between, node_cost
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import plan_up
from clusterkit.spec import loads
from tests import support

SPEC = "name: t\nregion: us-east-1\nnodes: {count: 3, instance_types: [p4d.24xlarge]}\n"
NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


def _node(i: int, price: float | None = 10.0) -> Node:
    return Node(f"i-{i}", i, "running", "p4d.24xlarge", "us-east-1a", "spot", "us-east-1",
                (NOW - timedelta(hours=2)).isoformat(), price=price, tags=wanted_tags("t", i))


def test_fresh_plan_creates_everything_and_prices_the_choice():
    spec = loads(SPEC)
    plan = plan_up(spec, support.observed(spec, key_pair_missing=True, candidates=[
        support.offer("p4d.24xlarge", "spot", 9.5, on_demand=32.77, gpus=8)]))
    assert plan.mutates and plan.stack == "create" and plan.key_pair == "import"
    assert plan.nodes.launch == (0, 1, 2)
    assert plan.hourly_after() == 28.5
    text = "\n".join(plan_lines(plan))
    assert "launch 3 node(s)" in text and "$28.5000/h" in text


def test_unchanged_cluster_plans_nothing():
    spec = loads(SPEC)
    plan = plan_up(spec, support.observed(spec, stack="CREATE_COMPLETE",
                                          nodes=[_node(0), _node(1), _node(2)]))
    assert not plan.mutates
    assert plan.to_json()["hourly_usd"] == 30.0
    assert plan_lines(plan)[:2] == ["cluster t in us-east-1: nothing to change",
                                    "the cluster's nodes cost $30.0000/h"]


def test_cost_so_far_and_hourly():
    assert abs(hours_between((NOW - timedelta(minutes=90)).isoformat(), NOW) - 1.5) < 1e-9
    assert node_cost(_node(0, 10.0), NOW) == 20.0
    assert node_cost(_node(0, None), NOW) is None
    assert cluster_hourly([_node(0, 1.25), _node(1, 2.0)]) == 3.25
    assert cluster_hourly([_node(0, 1.0), _node(1, None)]) is None


def test_the_stack_line_names_what_the_spec_puts_in_the_stack():
    """No placement group line for `placement_group: false`, EFS only when created."""
    def create_line(extra: str) -> str:
        spec = loads(SPEC.replace("[p4d.24xlarge]", "[p4d.24xlarge]" + extra))
        plan = plan_up(spec, support.observed(spec))
        return next(line for line in plan_lines(plan) if line.startswith("create the stack"))

    assert create_line("") == ("create the stack (security group, placement group, launch "
                               "template, node and controller roles)")
    assert "placement group" not in create_line(", placement_group: false")
    efs = "}\nstorage: {efs: {mount: /efs}"
    assert create_line(efs).endswith("node and controller roles, EFS file system)")
    kept = "}\nstorage: {efs: {file_system_id: fs-0123456789abcdef0}"
    assert "EFS" not in create_line(kept)


def test_the_instance_profiles_are_planned_from_what_was_read():
    """A new cluster with EFS: both profiles made through IAM's API, shown; profiles read
    and holding their roles: nothing; not read (no EFS, or nothing to make): nothing."""
    spec = loads(SPEC.replace("[p4d.24xlarge]", "[p4d.24xlarge]}\nstorage: {efs: {mount: /efs}"))
    fresh = plan_up(spec, replace(support.observed(spec), profiles={}))
    assert [(s.name, s.create, s.add_role) for s in fresh.profiles] == [
        (f"clusterkit-{spec.name}-{fresh.region}-node", True, True),
        (f"clusterkit-{spec.name}-{fresh.region}-controller", True, True)]
    assert sum("create through IAM's API" in line for line in plan_lines(fresh)) == 2
    held = {s.name: ("role",) for s in fresh.profiles}
    assert plan_up(spec, replace(support.observed(spec), profiles=held)).profiles == ()
    assert plan_up(spec, support.observed(spec)).profiles == ()


CASES = sorted((Path(__file__).parent / "plan_up_cases").glob("*.json"))


def _observed(spec, seen: dict):
    """plan_up_cases' "observed" as a plan.world.Observed (tags as `up` writes them)."""
    nodes = [Node(f"i-{n['index']}", n["index"], n["state"], n["type"], n["az"], n["market"],
                  seen["region"], (NOW - timedelta(hours=1)).isoformat(), price=n.get("price"),
                  tags=wanted_tags(spec.name, n["index"])) for n in seen["nodes"]]
    offers = [support.offer(c["type"], c["market"], c["price"], az=c["az"],
                            on_demand=c.get("on_demand")) for c in seen["offers"]]
    stack = seen["stack"]
    observed = support.observed(spec, region=seen["region"], nodes=nodes,
                                stack=stack and stack["status"],
                                key_pair_missing=seen["key_pair_missing"],
                                offers=offers)
    params = stack and stack["parameters"]
    if isinstance(params, dict):  # the wanted ones, but for these
        wanted = dict(observed.stack.parameters)
        observed = replace(observed, stack=replace(observed.stack,
                                                   parameters={**wanted, **params["wanted_but"]}))
    return observed


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_planning_cases(case: Path):
    """Planning as data: a spec and one observation of the world in, the plan out."""
    data = json.loads(case.read_text())
    spec = loads(data["spec"])
    want = data["plan"]
    if "error" in want:  # planning refuses: exit 1, saying why
        with pytest.raises(ClusterkitError) as refused:
            plan_up(spec, _observed(spec, data["observed"]))
        assert want["error"] in refused.value.message and refused.value.exit_code == 1
        return
    plan = plan_up(spec, _observed(spec, data["observed"]))
    assert (plan.stack, list(plan.stack_changes), plan.key_pair) == (
        want["stack"], want.get("stack_changes", []), want["key_pair"])
    assert (list(plan.nodes.launch), list(plan.nodes.terminate), list(plan.nodes.start),
            len(plan.nodes.retag_ids)) == (want["launch"], want["terminate"], want["start"],
                                           want["retag"])
    assert (plan.choice.describe() if plan.choice else None) == want["choice"]
    assert (plan.choice.worst_price if plan.choice else None) == want["worst_price"]
    assert plan.hourly_after() == want["hourly"]
    assert (plan.mutates, plan.asks) == (want["mutates"], want["asks"])
    assert [d.key for d in plan.refused] == want["refused"]
    assert [f"{o.instance_type} {o.market} {o.az}" for o in plan.candidates] == \
        want["candidates"]  # what a launch walks, in this order, and nothing else
