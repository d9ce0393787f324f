"""plan.mounts: a mount target of a file system of yours lent to a cluster and given back."""

from __future__ import annotations

import pytest

from clusterkit.plan.mounts import MAX_GROUPS, MountTarget, give_back, in_subnet, lend

YOURS = MountTarget("fsmt-0a", "subnet-a", ("sg-yours",))


def test_the_target_in_the_nodes_subnet_is_found():
    other = MountTarget("fsmt-0b", "subnet-b", ("sg-yours",))
    assert in_subnet((YOURS, other), "subnet-b") is other
    assert in_subnet((YOURS, other), "subnet-c") is None
    assert in_subnet((YOURS,), None) is None


def test_lending_adds_the_clusters_group_once():
    assert lend(YOURS, "sg-c") == ("sg-yours", "sg-c")
    assert lend(MountTarget("fsmt-0a", "subnet-a", ("sg-yours", "sg-c")), "sg-c") is None


def test_a_target_with_efs_s_five_groups_is_refused_naming_it():
    full = MountTarget("fsmt-0f", "subnet-a", tuple(f"sg-{i}" for i in range(MAX_GROUPS)))
    with pytest.raises(ValueError, match="fsmt-0f has 5 security groups"):
        lend(full, "sg-c")


def test_giving_back_keeps_your_groups_and_deletes_only_a_target_of_the_clusters_own():
    lent = MountTarget("fsmt-0a", "subnet-a", ("sg-yours", "sg-c"))
    assert give_back(lent, ["sg-c"]) == ("sg-yours",)
    assert give_back(MountTarget("fsmt-0m", "subnet-b", ("sg-c",)), ["sg-c", "sg-d"]) == ()
    assert give_back(YOURS, ["sg-c"]) is None
