"""Which AMI the nodes get, from the images the region has (``aws.lookup.images``). PURE.

By id: that image. By name: the newest match (creation date, then id, so the choice is
total); a stack that already runs keeps its AMI (cluster.lookups), so a newer release
never mixes two AMIs in one cluster."""

from __future__ import annotations

from collections.abc import Sequence
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


def choose_image(candidates: Sequence[ImageCandidate], image: Image,
                 region: str) -> ImageCandidate:
    """The newest candidate; UsageError (exit 2) naming the spec's image when none."""
    if not candidates:
        raise UsageError(f"no AMI {image.id or repr(image.name)} in {region}",
                         "set nodes.image.id to an AMI of this region, or fix "
                         "nodes.image.name / nodes.image.owner")
    return max(candidates, key=lambda c: (c.created, c.image_id))
