"""plan.dataset: the snapshot checks as data, which volumes are clones, what a deploy
changes per node, what the clones cost, hydration as `status` shows it."""

from __future__ import annotations

import dataclasses

import pytest

from clusterkit.plan import dataset as pd
from clusterkit.plan.spend import EBS_GB_MONTH
from clusterkit.spec.model import Dataset

SID = "snap-0123456789abcdef0"
OTHER = "snap-0fedcba9876543210"
PUBLISHED = {pd.DATASET_TAG: "imgs", pd.PUBLISHED_TAG: "complete",
             pd.MANIFEST_TAG: "ab" * 32}


def snap(state: str = "completed", size: int = 10, tags: dict | None = None,
         progress: str = "") -> pd.Snapshot:
    return pd.Snapshot(SID, "us-east-1", state, size, progress,
                       PUBLISHED if tags is None else tags)


@pytest.mark.parametrize("found,elsewhere,size_gb,words", [
    (None, (), None, ["no snapshot", SID, "us-east-1"]),
    (None, ("eu-west-1",), None, ["is in eu-west-1", "not in the cluster's region us-east-1"]),
    (snap("pending", progress="40%"), (), None, ["not completed", "pending, 40%"]),
    (snap("error"), (), None, ["in state error"]),
    (snap(tags={pd.DATASET_TAG: "imgs"}), (), None, ["interrupted", pd.PUBLISHED_TAG]),
    (snap(tags={pd.UPLOAD_TAG: "imgs"}), (), None, ["interrupted", "dataset imgs"]),
    (snap(size=10), (), 8, ["10 GiB", "larger than", "size_gb (8)"]),
])
def test_refusals_name_the_snapshot_and_carry_a_hint(found, elsewhere, size_gb, words):
    verdict = pd.check_snapshot(SID, "us-east-1", found, elsewhere, size_gb)
    assert not verdict.ok and SID in verdict.error and verdict.hint
    for word in words:
        assert word in verdict.error, (word, verdict.error)


def test_other_region_hint_is_the_copy_command():
    verdict = pd.check_snapshot(SID, "us-east-1", None, ("eu-west-1",))
    assert "copy-snapshot --source-region eu-west-1" in verdict.hint


def test_published_snapshot_passes_with_its_own_size_or_a_larger_one():
    assert pd.check_snapshot(SID, "us-east-1", snap(size=10)) == pd.SnapshotVerdict(size_gib=10)
    assert pd.check_snapshot(SID, "us-east-1", snap(size=10), size_gb=10).size_gib == 10
    assert pd.check_snapshot(SID, "us-east-1", snap(size=10), size_gb=50).size_gib == 50


def test_a_hand_made_snapshot_is_accepted_with_a_warning():
    verdict = pd.check_snapshot(SID, "us-east-1", snap(tags={}))
    assert verdict.ok and len(verdict.warnings) == 1 and "no manifest" in verdict.warnings[0]


def test_is_clone_needs_the_tag_to_name_the_volumes_own_snapshot():
    assert pd.is_clone({pd.CLONE_OF_TAG: SID}, SID)
    assert not pd.is_clone({pd.CLONE_OF_TAG: SID}, OTHER)  # the root volume of a launch
    assert not pd.is_clone({}, SID) and not pd.is_clone({pd.CLONE_OF_TAG: SID}, None)
    tags = pd.clone_tags({"clusterkit:cluster": "c"}, SID, 3)
    assert tags == {"clusterkit:cluster": "c", pd.CLONE_OF_TAG: SID,
                    "clusterkit:role": "dataset", pd.NODE_INDEX_TAG: "3"}


NODES = [pd.NodeSlot(0, "i-0", "us-east-1a"), pd.NodeSlot(1, "i-1", "us-east-1a"),
         pd.NodeSlot(2, "i-2", "us-east-1a")]


def clone(vid: str, snapshot: str = SID, instance: str | None = None,
          index: int | None = None, az: str = "us-east-1a") -> pd.Clone:
    return pd.Clone(vid, snapshot, az, "in-use" if instance else "available", 10, instance,
                    "/dev/sdf" if instance else None, index)


def test_plan_first_deploy_creates_one_per_node():
    plan = pd.plan_deploy(SID, NODES, [])
    assert plan.create == (0, 1, 2) and not plan.keep and not plan.remove and plan.changes


def test_plan_second_deploy_changes_nothing():
    clones = [clone(f"vol-{i}", instance=f"i-{i}") for i in range(3)]
    plan = pd.plan_deploy(SID, NODES, clones)
    assert not plan.changes and sorted(plan.keep) == [0, 1, 2]


def test_plan_sets_delete_on_termination_where_aws_says_it_is_off():
    """An earlier run stopped between AttachVolume and ModifyInstanceAttribute: the kept
    clone gets the flag; None (the emulator reports no flag) is left alone."""
    flags = [True, False, None]
    clones = [dataclasses.replace(clone(f"vol-{i}", instance=f"i-{i}"),
                                  delete_on_termination=flag) for i, flag in enumerate(flags)]
    plan = pd.plan_deploy(SID, NODES, clones)
    assert plan.settle == (1,) and plan.changes and sorted(plan.keep) == [0, 1, 2]
    assert not plan.create and not plan.attach and not plan.replaces


def test_plan_launch_clones_belong_to_the_node_they_are_attached_to():
    """No node-index tag (a launch tags every volume alike): the attachment decides."""
    clones = [clone("vol-a", instance="i-2"), clone("vol-b", instance="i-0")]
    plan = pd.plan_deploy(SID, NODES, clones)
    assert plan.keep[2].volume_id == "vol-a" and plan.keep[0].volume_id == "vol-b"
    assert plan.create == (1,)


def test_plan_resumes_a_detached_clone_and_removes_spares_and_strays():
    clones = [clone("vol-0", index=0),                         # made, never attached
              clone("vol-1", instance="i-1"), clone("vol-1b", index=1),  # a spare
              clone("vol-x", index=7),                         # no such node any more
              clone("vol-az", index=2, az="us-east-1b")]       # wrong AZ
    plan = pd.plan_deploy(SID, NODES, clones)
    assert plan.attach[0].volume_id == "vol-0" and plan.keep[1].volume_id == "vol-1"
    assert sorted(c.volume_id for c in plan.remove) == ["vol-1b", "vol-az", "vol-x"]
    assert plan.create == (2,) and plan.replaces == ()  # none attached: no question


def test_plan_another_snapshot_replaces_the_attached_clones():
    clones = [clone(f"vol-{i}", snapshot=OTHER, instance=f"i-{i}") for i in range(3)]
    plan = pd.plan_deploy(SID, NODES, clones)
    assert plan.create == (0, 1, 2) and len(plan.replaces) == 3


def test_cost_of_gp3_clones_with_iops_throughput_and_an_initialization_rate():
    ds = Dataset(snapshot=SID, iops=6000, throughput=250, initialization_rate=300)
    cost = pd.dataset_cost(ds, 4, 150, EBS_GB_MONTH)
    # per volume: 150 x 0.08 + 3000 x 0.005 + 125 x 0.040 = 12 + 15 + 5 = 32
    assert cost.per_month == 128.0
    assert cost.initialization == round(pd.INIT_RATE_PER_GIB * 150 * 4, 2)
    lines = cost.lines(ds)
    assert lines[0].startswith("dataset volumes: 4 x 150 GiB gp3, 6000 IOPS, 250 MiB/s")
    assert "$128.00/month" in lines[0] and "initialization rate 300 MiB/s" in lines[1]


def test_cost_without_extras_and_with_an_unknown_size():
    plain = pd.dataset_cost(Dataset(snapshot=SID), 2, 100, EBS_GB_MONTH)
    assert plain.per_month == 16.0 and plain.initialization is None
    assert len(plain.lines(Dataset(snapshot=SID))) == 1
    unknown = pd.dataset_cost(Dataset(snapshot=SID), 2, None, EBS_GB_MONTH)
    assert unknown.per_month is None and "the snapshot's size" in unknown.lines(Dataset())[0]


def test_io2_bills_every_iops():
    cost = pd.dataset_cost(Dataset(volume_type="io2", iops=1000), 1, 10, EBS_GB_MONTH)
    assert cost.per_month == round(10 * 0.125 + 1000 * 0.065, 2)


@pytest.mark.parametrize("detail,shown", [
    (None, "unknown"), ({}, "unknown"), ({"progress": None}, "unknown"),
    ({"progress": 100}, "done"), ({"progress": 42}, "42%"),
    ({"progress": 42, "eta_s": 600}, "42% (~10 min left)"), ({"progress": "x"}, "unknown"),
])
def test_hydration(detail, shown):
    assert pd.hydration(detail) == shown
