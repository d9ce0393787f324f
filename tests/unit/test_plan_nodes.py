"""plan.nodes: node identity from tags and the scaling actions of `up`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterkit.kinds import NodeAction
from clusterkit.plan.nodes import (
    INDEX_TAG,
    ROLE_TAG,
    SLOTS_TAG,
    Node,
    Retag,
    format_slots,
    launch_tags,
    node_actions,
    node_index,
    parse_slots,
    role_tags,
    wanted_tags,
)


def node(iid: str, index: int | None, state: str = "running", launched: str = "2026-01-01",
         tags: dict | None = None, az: str = "us-east-1a") -> Node:
    base = wanted_tags("c", index) if index is not None and tags is None else (tags or {})
    return Node(iid, index, state, "p4d.24xlarge", az, "spot", "us-east-1", launched,
                tags=base)


@given(st.sets(st.integers(min_value=0, max_value=2000), max_size=300))
def test_slots_round_trip(indexes):
    assert parse_slots(format_slots(indexes)) == sorted(indexes)


def test_slots_are_compact():
    assert format_slots([1, 3, 4, 5, 9]) == "1,3-5,9"
    assert len(format_slots(range(10_000))) < 20


def test_index_from_own_tag_then_from_launch_slots():
    assert node_index({INDEX_TAG: "7", SLOTS_TAG: "0-3"}, 1) == 7
    assert node_index({SLOTS_TAG: "2,5-6"}, 0) == 2
    assert node_index({SLOTS_TAG: "2,5-6"}, 2) == 6
    assert node_index({SLOTS_TAG: "2"}, 3) is None
    assert node_index({INDEX_TAG: "x"}, 0) is None
    assert node_index({}, None) is None


def test_roles_and_names():
    assert wanted_tags("big", 0) == {INDEX_TAG: "0", ROLE_TAG: "master", "Name": "big-master-0"}
    assert wanted_tags("big", 3)[ROLE_TAG] == "worker"


def test_fresh_cluster_launches_every_index():
    acts = node_actions("c", 4, [])
    assert acts.launch == (0, 1, 2, 3) and not acts.terminate and not acts.retag


def test_nothing_to_do_when_all_nodes_match():
    assert node_actions("c", 2, [node("i-0", 0), node("i-1", 1)]).empty


def test_scale_down_terminates_highest_indexes():
    nodes = [node(f"i-{i}", i) for i in range(4)]
    acts = node_actions("c", 2, nodes)
    assert set(acts.terminate) == {"i-2", "i-3"} and not acts.launch


def test_scale_up_fills_gaps_including_a_lost_master():
    acts = node_actions("c", 4, [node("i-1", 1), node("i-3", 3)])
    assert acts.launch == (0, 2)


def test_terminated_nodes_are_replaced_and_duplicates_removed():
    nodes = [node("i-old", 0, launched="2026-01-01"), node("i-dup", 0, launched="2026-01-02"),
             node("i-dead", 1, state="terminated")]
    acts = node_actions("c", 2, nodes)
    assert acts.terminate == ("i-dup",) and acts.launch == (1,)


def test_a_node_shutting_down_leaves_its_index_to_a_new_one():
    """A lost node terminated by a recovery is replaced at once, not once it is gone."""
    going = node("i-going", 1, state="shutting-down")
    nodes = [node("i-m", 0), going, node("i-w2", 2)]
    acts = node_actions("c", 3, nodes)
    assert acts.launch == (1,) and acts.terminate == () and acts.start == ()
    assert going.live and not going.holds_index  # `down` still waits for it
    assert "i-going" not in acts.by_node(nodes)


def test_a_standby_is_no_node_until_its_tags_are_swapped():
    from clusterkit.plan.nodes import STANDBY_TAG, standby_tags, swap_tags

    standby = node("i-sb", None, tags=standby_tags("c", 2))
    assert standby.standby_for == 2 and standby.index is None and not standby.holds_index
    acts = node_actions("c", 3, [node("i-m", 0), node("i-w1", 1), node("i-w2", 2), standby])
    assert acts.empty  # neither kept, nor surplus
    write, drop = swap_tags("c", 2)
    assert drop == (STANDBY_TAG,)
    swapped = node("i-sb", 2, tags={k: v for k, v in {**standby.tags, **write}.items()
                                    if k not in drop})
    assert swapped.holds_index and swapped.standby_for is None and swapped.name == "c-worker-2"


def test_untagged_node_of_a_crashed_up_gets_its_tags():
    crashed = node("i-9", 0, tags={SLOTS_TAG: "0-1", ROLE_TAG: "worker"})
    acts = node_actions("c", 1, [crashed])
    assert acts.retag == (Retag(("i-9",), wanted_tags("c", 0)),)


def _launched(cluster: str, slots: list[int]) -> list[Node]:
    """The nodes of one RunInstances, as EC2 describes them with only the creation tags."""
    tags = launch_tags(cluster, slots)
    return [Node(f"i-{i}", node_index(tags, k), "running", "c5.large", "us-east-1a",
                 "on-demand", "us-east-1", "2026-01-01", tags=tags, launch_index=k)
            for k, i in enumerate(slots)]


def test_role_tags_take_one_call_per_role_whatever_the_node_count():
    for count in (2, 16, 64):
        acts = node_actions("c", count, _launched("c", list(range(count))))
        assert [len(r.instance_ids) for r in acts.retag] == [1, count - 1], count
        assert [dict(r.tags) for r in acts.retag] == [role_tags("c", "master"),
                                                      role_tags("c", "worker")]
        assert not acts.launch and not acts.terminate


def test_identity_comes_from_the_launch_not_from_per_node_tags():
    nodes = _launched("c", list(range(16)))
    assert [n.index for n in nodes] == list(range(16))
    assert [n.name for n in nodes[:3]] == ["c-master-0", "c-worker-1", "c-worker-2"]
    assert [n.role for n in nodes[:2]] == ["master", "worker"]
    # after the role tags: nothing more to write, identity unchanged
    tagged = [Node(n.instance_id, n.index, n.state, n.instance_type, n.az, n.market,
                   n.region, n.launch_time, launch_index=n.launch_index,
                   tags={**n.tags, **role_tags("c", n.role)}) for n in nodes]
    assert node_actions("c", 16, tagged).empty
    assert [n.name for n in tagged] == [n.name for n in nodes]
    # a scale-up launch of workers only needs no call after it
    assert node_actions("c", 20, tagged + _launched("c", [16, 17, 18, 19])).empty


def test_nodes_with_per_node_tags_of_older_clusters_need_nothing():
    old = [Node(f"i-{i}", i, "running", "c5.large", "us-east-1a", "spot", "us-east-1",
                tags={"clusterkit:cluster": "c", **wanted_tags("c", i)}) for i in range(3)]
    assert node_actions("c", 3, old).empty
    assert [n.name for n in old] == ["c-master-0", "c-worker-1", "c-worker-2"]


def test_node_without_index_is_terminated():
    assert node_actions("c", 1, [node("i-0", 0), node("i-x", None, tags={})]).terminate == ("i-x",)


def test_added_nodes_follow_the_master():
    from clusterkit.plan.candidates import offer_of

    offer = offer_of([node("i-1", 1, az="us-east-1b"), node("i-0", 0, az="us-east-1c")])
    assert (offer.region, offer.az, offer.instance_type, offer.market) == \
        ("us-east-1", "us-east-1c", "p4d.24xlarge", "spot")


def test_launch_tags_are_true_for_every_instance_of_the_launch():
    assert launch_tags("c", [0]) == {"clusterkit:cluster": "c", "clusterkit:slots": "0",
                                     "clusterkit:index": "0", "clusterkit:role": "master",
                                     "Name": "c-master-0"}
    workers = launch_tags("c", [2, 3, 5])
    assert workers["clusterkit:role"] == "worker" and workers["clusterkit:slots"] == "2-3,5"
    assert "clusterkit:index" not in workers and workers["Name"] == "c-worker"
    assert launch_tags("c", [0, 1])["clusterkit:role"] == "pending"


def test_node_is_built_once_from_the_ec2_description():
    """aws.instances.to_node reads everything callers need (volumes, image, launch index,
    addresses); no EC2 dict travels further."""
    from clusterkit.aws.instances import to_node

    raw = {"InstanceId": "i-1", "State": {"Name": "running"}, "InstanceType": "c5.large",
           "Placement": {"AvailabilityZone": "us-east-1a"}, "ImageId": "ami-1",
           "AmiLaunchIndex": 1, "PublicIpAddress": "203.0.113.3", "PrivateIpAddress": "10.0.0.2",
           "Tags": [{"Key": "clusterkit:slots", "Value": "3-4"}, {"Key": "Name", "Value": "n"}],
           "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeId": "vol-1"}},
                                   {"DeviceName": "/dev/sdb", "VirtualName": "ephemeral0"}]}
    node = to_node(raw, "us-east-1")
    assert node.volume_ids == ("vol-1",) and node.image_id == "ami-1"
    assert (node.launch_index, node.index, node.role, node.name) == (1, 4, "worker", "n")
    assert (node.public_ip, node.private_ip, node.az) == ("203.0.113.3", "10.0.0.2", "us-east-1a")
    assert to_node({"InstanceId": "i-2"}, "r").volume_ids == ()


def test_node_order_master_first_unindexed_last():
    from clusterkit.plan.nodes import node_order

    nodes = [node("i-b", None), node("i-2", 2), node("i-a", None), node("i-0", 0)]
    assert [n.instance_id for n in sorted(nodes, key=node_order)] == \
        ["i-0", "i-2", "i-a", "i-b"]


def test_each_node_has_one_action_and_each_missing_index_a_launch():
    nodes = [node("i-0", 0), node("i-1", 1, tags={}), node("i-2", 2, state="stopped"),
             node("i-5", 5), node("i-x", 0, launched="2026-02-01"),
             node("i-t", 3, state="terminated")]
    actions = node_actions("c", 5, nodes)
    assert actions.by_node(nodes) == {
        "i-0": NodeAction.KEEP, "i-1": NodeAction.RETAG, "i-2": NodeAction.START,
        "i-5": NodeAction.TERMINATE, "i-x": NodeAction.TERMINATE,  # surplus; a duplicate
        "index 3": NodeAction.LAUNCH, "index 4": NodeAction.LAUNCH}
