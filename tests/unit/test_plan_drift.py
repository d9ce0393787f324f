"""plan.drift, plan.spend and the pure parts of `up`'s honesty: the spec against what
runs, what `up` will spend before it asks, and what still runs after a failure. Data in,
data out."""

from __future__ import annotations

import pytest

from clusterkit.cluster.provision.launch import capacity_hint
from clusterkit.cluster.provision.running import running_lines
from clusterkit.plan.drift import Apply, refused, spec_drift
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.plan.spend import plan_lines, spend
from clusterkit.plan.up import plan_up
from clusterkit.spec import loads
from tests import support

BASE = {"count": 2, "types": "[c5.large, m5.large]", "market": "spot-then-on-demand",
        "image": "{id: ami-11111111}", "regions": "[us-west-2]"}


def _spec(**over: object):
    v = {**BASE, **over}
    master = f"  master: {{market: {v['master']}}}\n" if "master" in v else ""
    return loads(f"name: t\nregion: us-east-1\nregions: {v['regions']}\nnodes:\n"
                 f"  count: {v['count']}\n  instance_types: {v['types']}\n{master}"
                 f"  market: {v['market']}\n  image: {v['image']}\n"
                 "  root_volume: {size_gb: 100, type: gp3}\n"
                 "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n")


def _node(i: int, *, itype: str = "c5.large", market: str = "spot", region: str = "us-east-1",
          ami: str = "ami-11111111", state: str = "running", price: float | None = 0.04) -> Node:
    return Node(f"i-{i}", i, state, itype, f"{region}a", market, region, price=price,
                tags=wanted_tags("t", i), image_id=ami)


CLUSTER = [_node(0), _node(1)]


def test_unchanged_spec_has_no_drift_and_a_new_cluster_none_either():
    assert spec_drift(_spec(), CLUSTER) == []
    assert spec_drift(_spec(), []) == []
    # the other allowed type, the other market of the policy, another allowed region
    mixed = [_node(0, itype="m5.large", market="on-demand", region="us-west-2")]
    assert spec_drift(_spec(count=1), mixed) == []


@pytest.mark.parametrize(("over", "nodes", "key", "running", "wanted"), [
    ({"types": "[p4d.24xlarge]"}, CLUSTER, "nodes.instance_types", "c5.large",
     "p4d.24xlarge"),
    ({"market": "on-demand"}, CLUSTER, "nodes.market", "spot", "on-demand"),
    ({"market": "spot"}, [_node(0, market="on-demand"), _node(1)], "nodes.market",
     "on-demand, spot", "spot"),
    ({"image": "{id: ami-22222222}"}, CLUSTER, "nodes.image.id", "ami-11111111", "ami-22222222"),
    ({"regions": "[]"}, [_node(0, region="us-west-2"), _node(1, region="us-west-2")],
     "region", "us-west-2", "us-east-1"),
])
def test_changes_that_need_down_are_refused(over, nodes, key, running, wanted):
    (diff,) = spec_drift(_spec(**over), nodes)
    assert (diff.key, diff.running, diff.wanted, diff.apply) == (key, running, wanted,
                                                                 Apply.NEEDS_DOWN)
    assert refused([diff]) == [diff]
    assert key in diff.describe() and "cannot be applied" in diff.describe()


def test_a_master_set_apart_is_held_to_its_own_market():
    on_demand_master = [_node(0, market="on-demand"), _node(1)]
    assert spec_drift(_spec(market="spot", master="on-demand"), on_demand_master) == []
    (diff,) = spec_drift(_spec(market="spot", master="on-demand"), CLUSTER)
    assert (diff.key, diff.running, diff.wanted) == ("nodes.master.market", "spot",
                                                     "on-demand")
    (diff,) = spec_drift(_spec(market="spot"), on_demand_master)  # not set apart
    assert diff.key == "nodes.market"


def test_up_prices_a_master_set_apart_at_its_market_and_says_so():
    spec = _spec(count=3, market="spot", master="on-demand")
    offer = support.offer("c5.large", "spot", 0.04, on_demand=0.085)
    plan = plan_up(spec, support.observed(spec, candidates=[offer]))
    lines = spend(plan, spec).lines
    launch = next(line for line in lines if line.startswith("launch 3 node(s)"))
    assert "$0.0400/h each, the master on-demand at $0.0850/h (nodes.master.market)" in launch
    assert launch.endswith("now = $0.1650/h")  # 2 x 0.04 + 0.085
    assert plan.hourly_after() == pytest.approx(0.165)
    same = _spec(count=3, market="on-demand", master="on-demand")  # nothing apart
    od = support.offer("c5.large", "on-demand", 0.085)
    plan = plan_up(same, support.observed(same, candidates=[od]))
    assert "master" not in next(line for line in spend(plan, same).lines
                                if line.startswith("launch"))
    assert plan.hourly_after() == pytest.approx(0.255)


def test_an_image_chosen_by_name_is_never_drift():
    spec = _spec(image="{name: 'Deep Learning *'}")
    assert spec_drift(spec, [_node(0, ami="ami-00000000"), _node(1, ami="ami-00000000")]) == []


@pytest.mark.parametrize("count", [1, 4])
def test_a_changed_count_is_applied_in_place(count):
    (diff,) = spec_drift(_spec(count=count), CLUSTER)
    assert (diff.key, diff.running, diff.wanted, diff.apply) == ("nodes.count", "2",
                                                                 str(count), Apply.IN_PLACE)
    assert refused([diff]) == []


def _plan(spec, nodes, candidates=(), *, stack="CREATE_COMPLETE"):
    return plan_up(spec, support.observed(spec, nodes=nodes, stack=stack,
                                          candidates=candidates))


def test_plan_carries_the_drift_and_says_up_refuses_it():
    plan = _plan(_spec(types="[p4d.24xlarge]"), CLUSTER)
    assert [d.key for d in plan.refused] == ["nodes.instance_types"]
    text = "\n".join(plan_lines(plan))
    assert "differs: nodes.instance_types: running c5.large" in text
    assert "clusterkit down t" in text
    assert plan.to_json()["drift"][0]["in_place"] is False


def test_only_changes_that_spend_or_remove_nodes_ask():
    assert not _plan(_spec(), CLUSTER).asks  # nothing to do
    retag_only = [_node(0), Node("i-1", 1, "running", "c5.large", "us-east-1a", "spot",
                                 "us-east-1", image_id="ami-11111111")]
    plan = _plan(_spec(), retag_only)
    assert plan.mutates and not plan.asks  # writing missing tags costs nothing
    assert _plan(_spec(count=1), CLUSTER).asks  # removes a worker
    assert _plan(_spec(count=3), CLUSTER).asks  # launches one
    assert _plan(_spec(), [], stack=None).asks  # a new cluster


def test_spend_prices_nodes_worst_case_volumes_and_efs():
    candidates = [support.offer("c5.large", "spot", 0.04, on_demand=0.085),
                  support.offer("c5.large", "on-demand", 0.085)]  # the worst case: 0.085
    result = spend(_plan(_spec(count=2), [], candidates, stack=None), _spec(count=2))
    text = "\n".join(result.lines)
    assert "launch 2 node(s)" in text and "c5.large, spot, in us-east-1a" in text
    assert "$0.0400/h each now = $0.0800/h" in text
    assert "worst case $0.1700/h" in text and "falls back to on-demand" in text
    # 2 x 100 GB gp3 at $0.08/GB-month = $16/month = $0.0219/h
    assert "root volumes: 2 x 100 GB gp3 = $16.0000/month ($0.0219/h)" in text
    assert "EFS" in text and "$0.30/GB-month" in text
    assert "us-east-1 list prices" in text  # the assumption is stated
    assert result.nodes_now == 0.08 and result.nodes_worst == 0.17
    assert "new spending: $0.1019/h now, at worst $0.1919/h" in text


def test_spend_of_an_on_demand_choice_has_no_worse_case():
    candidates = [support.offer("c5.large", "on-demand", 0.085)]
    text = "\n".join(spend(_plan(_spec(market="on-demand"), [], candidates, stack=None),
                           _spec(market="on-demand")).lines)
    assert "worst case" not in text and "at worst" not in text


def test_running_lines_name_each_instance_its_price_and_the_down_command():
    nodes = [_node(0, price=0.04), _node(1, price=None, market="on-demand"),
             _node(2, state="terminated")]
    text = "\n".join(running_lines("t", nodes, ["us-east-1"]))
    assert "i-0" in text and "i-1" in text and "i-2" not in text
    assert "$0.0400/h" in text and "at most $0.0850/h" in text  # c5.large on-demand
    assert "clusterkit down t --region us-east-1" in text
    none = "\n".join(running_lines("t", [_node(0, state="terminated")], ["us-east-1"]))
    assert "no instance of cluster t is running" in none
    assert "clusterkit down t --region us-east-1" in none


def test_the_capacity_hint_fits_the_market():
    assert "on-demand" in capacity_hint("spot")
    assert "on-demand" not in capacity_hint("on-demand")
    assert "on-demand" not in capacity_hint("spot-then-on-demand")


def test_starting_stopped_nodes_asks_and_is_priced():
    plan = _plan(_spec(), [_node(0), _node(1, state="stopped", price=0.05)])
    assert plan.nodes.start == ("i-1",) and plan.asks
    text = "\n".join(spend(plan, _spec()).lines)
    assert "start 1 stopped node(s), $0.0500/h in all: t-worker-1 (i-1)" in text
