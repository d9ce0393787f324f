"""`clusterkit image build SPEC | list | delete IMAGE_ID`: option wiring and rendering."""

from __future__ import annotations

import click

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.interrupt import reported_interrupt
from clusterkit.cli.provision import TIMEOUT_HELP, _ask, _terminal, runtime
from clusterkit.cli.render import print_json
from clusterkit.errors import ClusterkitError, UsageError


@click.group()
def image() -> None:
    """Images (AMIs) with the spec's train.packages baked in: `up` of a new cluster uses
    the newest one built from the same inputs, and its env step is already done on every
    node. `down` never deletes an image."""


def _region() -> str:
    """--region, else the profile's (as the AWS CLI); exit 2 when neither says one."""
    region = get_ctx().region or runtime().session.region_name
    if not region:
        raise UsageError("no region: clusterkit's images are per region",
                         "pass --region or set one in your AWS profile")
    return region


@image.command("build")
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--yes", "-y", is_flag=True, help="Do not ask before spending (needed "
              "without a terminal).")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@json_option
def build(spec_file: str, yes: bool, timeout: float) -> None:
    """Build an image of SPEC: one node of its base image and instance type (a cluster
    NAME-image, costed and confirmed as `up` does), its env step (train.packages) and
    receipts, CreateImage, the wait until available; the builder node is then taken down
    (also on failure or Ctrl-C). The image is tagged with a digest of the base image, the
    packages, train.python, the env playbooks and the clusterkit version; an image of
    the same digest is reused. Prints the AMI id.

    \b
    Example:
      clusterkit image build cluster.yaml
    """
    from clusterkit.cluster.provision.imagebuild import build as build_image
    from clusterkit.spec import load

    ctx = get_ctx()
    spec = load(spec_file)
    with reported_interrupt():
        result = build_image(runtime(spec.region), spec, yes=yes or ctx.yes,
                             confirm=_ask if _terminal() else None, timeout=timeout)
    if ctx.json:
        print_json(result.to_json())
    else:
        click.echo(result.image_id)


@image.command("list")
@json_option
def list_images() -> None:
    """The images clusterkit built in the region (--region, else the profile's): id,
    state, creation date, name.

    \b
    Example:
      clusterkit image list --region us-east-1
    """
    from clusterkit.cluster.provision.imagebuild import list_images as images

    ctx = get_ctx()
    found = images(runtime(), _region())
    if ctx.json:
        print_json([{"image_id": b.candidate.image_id, "name": b.candidate.name,
                     "created": b.candidate.created, "state": b.state,
                     "tags": dict(b.tags)} for b in found])
        return
    for b in found:
        ctx.console.print(f"{b.candidate.image_id}  {b.state:9}  {b.candidate.created}  "
                          f"{b.candidate.name}", markup=False, highlight=False)


@image.command("delete")
@click.argument("image_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete(image_id: str, yes: bool) -> None:
    """Deregister IMAGE_ID and delete its snapshot: only an image clusterkit built (its
    clusterkit:image-digest tag); any other is refused (exit 2).

    \b
    Example:
      clusterkit image delete ami-0123456789abcdef0
    """
    from clusterkit.cluster.provision.imagebuild import delete_image

    ctx = get_ctx()
    if not (yes or ctx.yes) and not (_terminal() and _ask(f"delete image {image_id} "
                                                          "and its snapshot?")):
        raise ClusterkitError(f"image {image_id} not deleted: not confirmed",
                              "answer yes, or pass --yes")
    snapshots = delete_image(runtime(), _region(), image_id)
    ctx.console.print(f"deleted {image_id}" + (f" and {', '.join(snapshots)}"
                                               if snapshots else ""), markup=False)


COMMANDS = [image]
