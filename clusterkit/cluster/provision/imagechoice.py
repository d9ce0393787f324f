"""Which built image a spec's nodes get (`up`, `plan`: through ``lookups.facts``) and
what an image of the spec holds (``inputs``: `image build` tags it with their digest).
Apart from ``imagebuild``, which runs `up` and `down` for its builder."""

from __future__ import annotations

from clusterkit import __version__
from clusterkit.aws import images as ec2images
from clusterkit.bootstrap.steps import packages_hash, read_playbooks
from clusterkit.cluster.runtime import Runtime
from clusterkit.plan.images import ImageChoice, ImageInputs, choose_built
from clusterkit.spec.model import Spec


def inputs(spec: Spec, base: str) -> ImageInputs:
    """What an image of ``spec`` on the AMI ``base`` holds (its digest's inputs)."""
    train = spec.train
    packages = tuple(train.packages) if train is not None else ()
    return ImageInputs.of(base, train.python if train is not None else "python3",
                          packages_hash(packages), read_playbooks(), __version__)


def choice(rt: Runtime, spec: Spec, region: str, base: str) -> ImageChoice:
    """The built image `up` of ``spec`` uses in ``region`` (or none, and why)."""
    return choose_built(ec2images.built_images(rt.session, region), inputs(spec, base),
                        spec.name)
