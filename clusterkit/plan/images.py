"""Which AMI the nodes get, from the images the region has (``aws.lookup.images``). PURE.

By id: that image. By name: the newest match (creation date, then id, so the choice is
total); a stack that already runs keeps its AMI (cluster.lookups), so a newer release
never mixes two AMIs in one cluster. An image clusterkit built (`clusterkit image build`)
is keyed by the digest of what went in (``ImageInputs``); a new cluster of a spec with
packages takes the newest available one of the same digest (``choose_built``), else the
base image, saying which input changed since its last image."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clusterkit.errors import UsageError
from clusterkit.spec.model import Image

DEFAULT_ROOT_DEVICE = "/dev/sda1"


@dataclass(frozen=True)
class ImageCandidate:
    """One AMI DescribeImages found: what the choice and the launch template need."""

    image_id: str
    name: str
    created: str  # ISO 8601, as EC2 writes it (sorts as text)
    root_device: str | None


def age(candidate: ImageCandidate) -> tuple[str, str]:
    """The order of images: creation date, then id (so the newest is one image)."""
    return candidate.created, candidate.image_id


def choose_image(candidates: Sequence[ImageCandidate], image: Image,
                 region: str) -> ImageCandidate:
    """The newest candidate; UsageError (exit 2) naming the spec's image when none."""
    if not candidates:
        raise UsageError(f"no AMI {image.id or repr(image.name)} in {region}",
                         "set nodes.image.id to an AMI of this region, or fix "
                         "nodes.image.name / nodes.image.owner")
    return max(candidates, key=age)


# -- images clusterkit built (`clusterkit image build`) ---------------------------------------
# An image clusterkit built carries these tags: the digest of what went in, each input
# (so a stale image can say which one changed) and the spec it was built for.
DIGEST_TAG = "clusterkit:image-digest"
SPEC_TAG = "clusterkit:image-of"
INPUT_TAGS = {"base": "clusterkit:image-base", "python": "clusterkit:image-python",
              "packages": "clusterkit:image-packages",
              "playbooks": "clusterkit:image-playbooks",
              "version": "clusterkit:image-version"}
INPUT_WORDS = {"base": "the base image", "python": "train.python",
               "packages": "train.packages", "playbooks": "the env playbooks",
               "version": "the clusterkit version"}
BAKED_PLAYBOOKS = ("env.sh", "receipt.sh")  # what the baked env step ran


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ImageInputs:
    """What goes into a built image: its digest is the image's key."""

    base: str  # the AMI id the builder node ran
    python: str
    packages: str  # sha of train.packages as written (bootstrap.steps.packages_hash)
    playbooks: str  # sha of BAKED_PLAYBOOKS' text
    version: str

    @classmethod
    def of(cls, base: str, python: str, packages_key: str,
           playbooks: Mapping[str, str], version: str) -> ImageInputs:
        text = "".join(f"{name}\n{playbooks.get(name, '')}" for name in BAKED_PLAYBOOKS)
        return cls(base, python, packages_key, _sha(text), version)

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(json.dumps(
            {name: getattr(self, name) for name in INPUT_TAGS}, sort_keys=True,
        ).encode()).hexdigest()

    def tags(self, spec_name: str) -> dict[str, str]:
        return {DIGEST_TAG: self.digest, SPEC_TAG: spec_name,
                **{tag: getattr(self, name) for name, tag in INPUT_TAGS.items()}}


@dataclass(frozen=True)
class BuiltImage:
    """An AMI clusterkit built (DescribeImages of the account's own, with its tags)."""

    candidate: ImageCandidate
    tags: Mapping[str, str]
    state: str = "available"

    @property
    def digest(self) -> str:
        return self.tags.get(DIGEST_TAG, "")

    def changed(self, wanted: ImageInputs) -> list[str]:
        """The inputs (in words) that differ from ``wanted``."""
        return [INPUT_WORDS[name] for name, tag in INPUT_TAGS.items()
                if self.tags.get(tag) != getattr(wanted, name)]


@dataclass(frozen=True)
class ImageChoice:
    """The built image `up` uses (None: the base image), and why, in words."""

    image: BuiltImage | None
    note: str


def choose_built(built: Sequence[BuiltImage], wanted: ImageInputs,
                 spec_name: str) -> ImageChoice:
    """The newest available image whose digest is ``wanted``'s; else None, saying which
    input changed since the newest image built for ``spec_name`` (if any)."""
    def newest(images: Sequence[BuiltImage]) -> BuiltImage:
        return max(images, key=lambda b: age(b.candidate))

    usable = [b for b in built if b.state == "available"]
    matching = [b for b in usable if b.digest == wanted.digest]
    if matching:
        best = newest(matching)
        return ImageChoice(best, f"image {best.candidate.image_id}: built by clusterkit "
                           f"({best.candidate.created}) with this spec's packages "
                           "and playbooks; the env step is already done on its nodes")
    mine = [b for b in usable if b.tags.get(SPEC_TAG) == spec_name]
    if not mine:
        return ImageChoice(None, f"image {wanted.base} (base): no image built for these "
                           "packages; every node installs train.packages (`clusterkit "
                           "image build SPEC` bakes them)")
    stale = newest(mine)
    return ImageChoice(None, f"image {wanted.base} (base): image "
                       f"{stale.candidate.image_id} is stale ({', '.join(stale.changed(wanted))}"
                       " changed); `clusterkit image build SPEC` makes a current one")
