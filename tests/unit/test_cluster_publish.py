"""cluster.publish's pure parts: the node probe parser, labels, paths."""

from __future__ import annotations

import pytest

from clusterkit.cluster.dataset import publish
from clusterkit.errors import UsageError

EBS = "nvme-Amazon_Elastic_Block_Store_"


def test_probe_matches_the_mount_by_device_number_not_name() -> None:
    out = (f"mount 259:3 \nebs 103:1 {EBS}vol0aaa\nebs 103:3 {EBS}vol0bbb\n"
           f"ebs 103:4 {EBS}vol0bbb-part1\nmanifest {'a' * 64}\n")
    probe = publish.parse_probe(out)
    assert probe == publish.VolumeProbe("vol-0bbb", True, "a" * 64)  # hex 103 = 259


def test_probe_partition_matches_its_disk() -> None:
    probe = publish.parse_probe(f"mount 259:5 259:4\nebs 103:4 {EBS}vol0ccc\n")
    assert probe.volume_id == "vol-0ccc" and probe.manifest_sha256 is None


def test_probe_nothing_or_no_ebs_mounted() -> None:
    assert publish.parse_probe("none\n") == publish.VolumeProbe(None, False, None)
    assert publish.parse_probe(f"mount 7:3 \nebs 103:1 {EBS}vol0aaa\n").volume_id is None


@pytest.mark.parametrize("path", ["data", "/", "/da ta", "/x;rm", "$HOME/x"])
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(UsageError):
        publish.check_path(path)


def test_labels_follow_the_cluster_name_rule() -> None:
    assert publish.check_label("imagenet1k") == "imagenet1k"
    with pytest.raises(UsageError):
        publish.check_label("Image Net")
