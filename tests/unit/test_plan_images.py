"""plan.images.choose_image: the newest AMI of those the region has, the choice total;
none is a usage error naming the spec's image. The images clusterkit built: their
digest, and which one `up` uses or why none (data: plan_image_cases/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterkit.errors import UsageError
from clusterkit.plan.images import (
    DIGEST_TAG,
    SPEC_TAG,
    BuiltImage,
    ImageCandidate,
    ImageInputs,
    choose_built,
    choose_image,
)
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


# -- images clusterkit built: the digest and `up`'s choice (tests/unit/plan_image_cases) ------
CASES = sorted((Path(__file__).parent / "plan_image_cases").glob("*.json"))
WANTED = {"base": "ami-0base", "python": "python3", "packages": "0f05ba596aaa6758",
          "playbooks": "1234abcd1234abcd", "version": "0.1.0"}


def test_the_digest_is_pinned_and_each_input_changes_it():
    wanted = ImageInputs(**WANTED)
    assert wanted.digest == ("sha256:47d71ebff72a15e9dfb57a18752dbdecf8a7aadf65f9258b2bb"
                             "21dd20455b548")  # a new formula would make every image stale
    for name in WANTED:
        assert ImageInputs(**{**WANTED, name: "x"}).digest != wanted.digest, name
    tags = wanted.tags("c1")
    assert tags[DIGEST_TAG] == wanted.digest and tags[SPEC_TAG] == "c1"
    assert all(len(v) <= 256 for v in tags.values())  # EC2's limit on a tag value


def test_the_playbooks_input_is_the_baked_playbooks_only():
    books = {"env.sh": "a", "receipt.sh": "b", "scratch.sh": "c"}
    one = ImageInputs.of("ami-0", "python3", "k", books, "1")
    assert one == ImageInputs.of("ami-0", "python3", "k", {**books, "scratch.sh": "d"}, "1")
    assert one != ImageInputs.of("ami-0", "python3", "k", {**books, "env.sh": "e"}, "1")


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_image_choice(path: Path):
    case = json.loads(path.read_text())
    wanted = ImageInputs(**case["wanted"])
    built = [BuiltImage(ImageCandidate(i["id"], i["id"], i["created"], "/dev/sda1"),
                        ImageInputs(**{**case["wanted"], **i.get("differs", {})}).tags(i["of"]),
                        i.get("state", "available")) for i in case["images"]]
    chosen = choose_built(built, wanted, case["spec"])
    image = chosen.image.candidate.image_id if chosen.image else None
    assert (image, chosen.note) == (case["expect"]["image"], case["expect"]["note"])
