"""`clusterkit image build|list|delete`: an AMI with the spec's ``train.packages`` (the
env step, its receipt and the playbooks it ran) baked in, so `up` of a new cluster finds
the env step done on every node. The build is a one-node cluster of its own (the spec's
base image and instance type, no storage, named ``<name>-image``): `up` shows its cost
and asks, bootstraps it, CreateImage, the wait until available, then `down` of the
builder, whatever happened (Ctrl-C too), saying what still runs if that fails. Images
are the user's to keep: `down` never deletes one; `image delete` deletes only an image
clusterkit tagged, with its snapshot."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from clusterkit.aws import images as ec2images
from clusterkit.aws import lookup
from clusterkit.cluster.provision.imagechoice import inputs
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.events import Stage
from clusterkit.plan.images import (
    DIGEST_TAG,
    BuiltImage,
    age,
    choose_built,
    choose_image,
)
from clusterkit.spec.model import Image, Spec, Storage

BUILDER_SUFFIX = "-image"
AVAILABLE_TIMEOUT = 3600.0  # an AMI of a large root volume can take many minutes


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    region: str
    digest: str
    reused: bool  # an available image of the same digest existed: nothing was built
    builder: str  # the builder cluster's name (gone again)

    def to_json(self) -> dict[str, Any]:
        return {"image_id": self.image_id, "region": self.region, "digest": self.digest,
                "reused": self.reused, "builder": self.builder}


def builder_spec(spec: Spec, base: str) -> Spec:
    """One node of the spec's instance types on ``base``; no storage, no autostop."""
    return replace(spec, name=spec.name[:63 - len(BUILDER_SUFFIX)] + BUILDER_SUFFIX,
                   nodes=replace(spec.nodes, count=1, image=Image(id=base, name=None),
                                 placement_group=False),
                   storage=Storage(), autostop=None)


def _base(rt: Runtime, spec: Spec) -> str:
    return choose_image(lookup.images(rt.session, spec.region, spec.nodes.image),
                        spec.nodes.image, spec.region).image_id


def build(rt: Runtime, spec: Spec, *, yes: bool, confirm: Any = None,
          timeout: float = 1800.0) -> BuildResult:
    """Build (or find) the image of ``spec``; the builder is always taken down."""
    from clusterkit.cluster.provision.up import up

    if spec.train is None or not spec.train.packages:
        raise UsageError(f"{spec.file}: train.packages is empty: an image would hold "
                         "nothing the base image lacks", "list the packages under "
                         "train.packages, or use the base image (nodes.image)")
    base = _base(rt, spec)
    wanted = inputs(spec, base)
    found = choose_built(ec2images.built_images(rt.session, spec.region), wanted, spec.name)
    builder = builder_spec(spec, base)
    if found.image is not None:
        rt.info(f"{found.note}: nothing to build")
        return BuildResult(found.image.candidate.image_id, spec.region, wanted.digest,
                           True, builder.name)
    rt.started(Stage.UP, f"building an image of {spec.name} on {base}: one node "
               f"({builder.name}), then CreateImage")
    try:
        made = up(rt, builder, yes=yes, confirm=confirm, timeout=timeout)
        if not made.nodes:
            raise UsageError("the image build was not confirmed: nothing was launched",
                             "run it again and answer yes, or pass --yes")
        image_id = ec2images.create_image(
            rt.session, spec.region, made.nodes[0].instance_id,
            f"{spec.name}-{wanted.digest[7:19]}", wanted.tags(spec.name))
        rt.info(f"CreateImage {image_id} of {made.nodes[0].instance_id}; waiting until "
                "it is available")
        wait_available(rt, spec.region, image_id)
    finally:
        _take_down(rt, builder.name)
    rt.done(Stage.UP, f"image {image_id} of {spec.name} is available ({wanted.digest})")
    return BuildResult(image_id, spec.region, wanted.digest, False, builder.name)


def _take_down(rt: Runtime, name: str) -> None:
    from clusterkit.cluster.provision.down import do_down

    try:
        do_down(name, yes=True, rt=rt)
    except (ClusterkitError, KeyboardInterrupt) as exc:
        raise ClusterkitError(f"the image builder {name} may still run (and cost): {exc}",
                              f"`clusterkit down {name}` removes it") from exc


def wait_available(rt: Runtime, region: str, image_id: str) -> BuiltImage:
    def probe() -> tuple[bool, BuiltImage | None]:
        seen = ec2images.describe(rt.session, region, image_id)
        if seen is not None and seen[0].state == "failed":
            raise ClusterkitError(f"image {image_id} failed",
                                  f"`clusterkit image delete {image_id}` removes it")
        return seen is not None and seen[0].state == "available", \
            seen[0] if seen else None

    return rt.wait_until(probe, deadline=rt.clock() + AVAILABLE_TIMEOUT, first=1.0,
                         late=lambda _: ClusterkitError(
                             f"image {image_id} not available after "
                             f"{AVAILABLE_TIMEOUT:.0f} s", "`clusterkit image list` shows "
                             f"it; `clusterkit image delete {image_id}` removes it"))


def list_images(rt: Runtime, region: str) -> list[BuiltImage]:
    return sorted(ec2images.built_images(rt.session, region), key=lambda b: age(b.candidate))


def delete_image(rt: Runtime, region: str, image_id: str) -> list[str]:
    """Deregister ``image_id`` and delete its snapshots; only an image clusterkit built
    (UsageError, exit 2, for any other). The snapshots deleted."""
    seen = ec2images.describe(rt.session, region, image_id)
    if seen is None:
        raise UsageError(f"no image {image_id} in {region}",
                         "`clusterkit image list` shows clusterkit's images")
    if DIGEST_TAG not in seen[0].tags:
        raise UsageError(f"image {image_id} was not built by clusterkit (no {DIGEST_TAG} "
                         "tag): not deleted", "deregister it yourself if you mean to")
    ec2images.deregister(rt.session, region, image_id, seen[1])
    return seen[1]
