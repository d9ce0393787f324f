"""plan.up and plan.cost: the plan as data and lines, $/h and cost so far."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from clusterkit.plan.cost import cluster_hourly, hours_between, node_cost
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.plan.up import Choice, plan_lines, plan_up
from clusterkit.spec import loads

SPEC = "name: t\nregion: us-east-1\nnodes: {count: 3, instance_types: [p4d.24xlarge]}\n"
NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


def _node(i: int, price: float | None = 10.0) -> Node:
    return Node(f"i-{i}", i, "running", "p4d.24xlarge", "us-east-1a", "spot", "us-east-1",
                (NOW - timedelta(hours=2)).isoformat(), price=price, tags=wanted_tags("t", i))


def test_fresh_plan_creates_everything_and_prices_the_choice():
    choice = Choice("p4d.24xlarge", "us-east-1", "us-east-1a", "spot", 9.5)
    plan = plan_up(loads(SPEC), region="us-east-1", stack_status=None, stack_params=None,
                   wanted_params={"A": "1"}, key_pair_missing=True, nodes=[], choice=choice)
    assert plan.mutates and plan.stack == "create" and plan.key_pair == "import"
    assert plan.nodes.launch == (0, 1, 2)
    assert plan.hourly_after() == 28.5
    text = "\n".join(plan_lines(plan))
    assert "launch 3 node(s)" in text and "$28.5000/h" in text


def test_unchanged_cluster_plans_nothing():
    plan = plan_up(loads(SPEC), region="us-east-1", stack_status="CREATE_COMPLETE",
                   stack_params={"A": "1"}, wanted_params={"A": "1"}, key_pair_missing=False,
                   nodes=[_node(0), _node(1), _node(2)], choice=None)
    assert not plan.mutates
    assert plan.to_json()["hourly_usd"] == 30.0
    assert "nothing to change" in plan_lines(plan)


def test_cost_so_far_and_hourly():
    assert abs(hours_between((NOW - timedelta(minutes=90)).isoformat(), NOW) - 1.5) < 1e-9
    assert node_cost(_node(0, 10.0), NOW) == 20.0
    assert node_cost(_node(0, None), NOW) is None
    assert cluster_hourly([_node(0, 1.25), _node(1, 2.0)]) == 3.25
    assert cluster_hourly([_node(0, 1.0), _node(1, None)]) is None


def test_the_stack_line_names_what_the_spec_puts_in_the_stack():
    """No placement group line for `placement_group: false`, EFS only when created."""
    def create_line(extra: str) -> str:
        plan = plan_up(loads(SPEC.replace("[p4d.24xlarge]", "[p4d.24xlarge]" + extra)),
                       region="us-east-1", stack_status=None, stack_params=None,
                       wanted_params={}, key_pair_missing=False, nodes=[], choice=None)
        return next(line for line in plan_lines(plan) if line.startswith("create stack"))

    assert create_line("") == ("create stack (security group, placement group, launch "
                               "template, instance role and profile)")
    assert "placement group" not in create_line(", placement_group: false")
    efs = "}\nstorage: {efs: {mount: /efs}"
    assert create_line(efs).endswith("instance role and profile, EFS file system)")
    kept = "}\nstorage: {efs: {file_system_id: fs-0123456789abcdef0}"
    assert "EFS" not in create_line(kept)
