"""plan.images.choose_image: the newest AMI of those the region has, the choice total;
none is a usage error naming the spec's image."""

from __future__ import annotations

import pytest

from clusterkit.errors import UsageError
from clusterkit.plan.images import ImageCandidate, choose_image
from clusterkit.spec.model import Image

DLAMI = Image(name="Deep Learning AMI GPU PyTorch * (Ubuntu 22.04) *")


def _ami(suffix: str, created: str) -> ImageCandidate:
    return ImageCandidate(f"ami-0{suffix * 16}", f"DLAMI {created}", created, "/dev/sda1")


def test_the_newest_by_creation_date_then_id():
    older, newer = _ami("a", "2026-10-01T00:00:00.000Z"), _ami("b", "2026-11-20T08:00:00.000Z")
    twin = _ami("c", "2026-11-20T08:00:00.000Z")
    assert choose_image([older, newer], DLAMI, "us-east-1") == newer
    assert choose_image([twin, older, newer], DLAMI, "us-east-1") == twin  # same date: id
    assert choose_image([newer, twin], DLAMI, "us-east-1") == twin  # whatever the order


def test_none_found_names_the_image_and_the_region():
    with pytest.raises(UsageError) as caught:
        choose_image([], DLAMI, "eu-west-1")
    assert caught.value.message == f"no AMI {DLAMI.name!r} in eu-west-1"
    assert "nodes.image.id" in caught.value.hint
    with pytest.raises(UsageError, match="no AMI ami-0123456789abcdef0 in us-east-1"):
        choose_image([], Image(id="ami-0123456789abcdef0"), "us-east-1")
