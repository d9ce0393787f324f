"""Read-only lookups the cluster's stack parameters need (VPC, AMI, a kept EFS, the key
pair), and the tags every resource carries."""

from __future__ import annotations

from clusterkit.aws import keypairs, lookup
from clusterkit.aws.stack import template_digest
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.plan.images import DEFAULT_ROOT_DEVICE, choose_image
from clusterkit.plan.stack import Facts, key_pair_name
from clusterkit.spec.model import Spec


def key_name(spec: Spec) -> str:
    return spec.ssh.key_name or key_pair_name(spec.name)


def facts(rt: Runtime, spec: Spec, region: str, *, current: dict[str, str] | None,
          ssh_cidr: str) -> Facts:
    """Look up VPC and AMI. An AMI chosen by name is kept from the existing stack, so a
    newer AMI release never mixes AMIs within one cluster. A file system the cluster
    kept (``deletion_policy: retain``) is mounted again instead of making another. A new
    stack of a spec with packages takes the newest image clusterkit built of the same
    inputs (``clusterkit image build``), else the base image, saying why.
    ``ssh_cidr``: the SSH rule's source (cluster.caller, looked up once per command)."""
    from clusterkit.cluster.provision import imagechoice
    from clusterkit.cluster.provision.kept_efs import reuse_id

    vpc = lookup.default_vpc(rt.session, region)
    note = ""
    if current and current.get("ImageId") and not spec.nodes.image.id:
        image, root = current["ImageId"], current.get("RootDeviceName", DEFAULT_ROOT_DEVICE)
    else:
        chosen = choose_image(lookup.images(rt.session, region, spec.nodes.image),
                              spec.nodes.image, region)
        image, root = chosen.image_id, chosen.root_device or DEFAULT_ROOT_DEVICE
        if current is None and spec.train is not None and spec.train.packages:
            built = imagechoice.choice(rt, spec, region, image)
            note = built.note
            if built.image is not None:
                image = built.image.candidate.image_id
                root = built.image.candidate.root_device or root
    return Facts(vpc_id=vpc, image_id=image, root_device=root, key_name=key_name(spec),
                 ssh_cidr=ssh_cidr, efs_id=reuse_id(rt, spec, region, current),
                 template_digest=template_digest(), image_note=note)


def key_pair_missing(rt: Runtime, spec: Spec, region: str) -> bool:
    """True when clusterkit must import the user's public key (spec names no key pair)."""
    if spec.ssh.key_name:
        if not keypairs.key_pair_exists(rt.session, region, spec.ssh.key_name):
            raise UsageError(f"EC2 key pair {spec.ssh.key_name!r} does not exist in {region}",
                             "create or import it, or remove ssh.key_name so clusterkit "
                             "imports your public key")
        return False
    return not keypairs.key_pair_exists(rt.session, region, key_pair_name(spec.name))

