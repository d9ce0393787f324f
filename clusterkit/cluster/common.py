"""Shared pieces of the provisioning commands: the runtime, finding a cluster by tag,
and the facts the stack parameters need."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from clusterkit.aws import instances, keypairs, lookup
from clusterkit.aws.identity import caller_cidr
from clusterkit.aws.session import make_session
from clusterkit.errors import UsageError
from clusterkit.plan.nodes import CLUSTER_TAG, Node
from clusterkit.plan.stack import Facts, key_pair_name
from clusterkit.spec.model import Spec


@dataclass
class Runtime:
    """What the orchestration needs besides the spec: an AWS session (boto3, made by
    aws.session), where to print, and the clock (tests pass a short poll)."""

    session: Any
    console: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    poll: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def make(cls, *, region: str | None = None, profile: str | None = None,
             session: Any = None, console: Console | None = None) -> Runtime:
        rt = cls(session=session or make_session(region, profile))
        if console is not None:
            rt.console = console
        return rt

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)


def resolve_target(target: str | None, region: str | None,
                   ) -> tuple[str | None, list[str], Spec | None]:
    """A cluster NAME (looked up in ``region``) or a spec file (its regions) ->
    (cluster name, regions to look in, the spec when a file was given)."""
    if target and (os.path.isfile(target) or target.endswith((".yaml", ".yml"))):
        from clusterkit.spec import load

        spec = load(target)
        return spec.name, list(dict.fromkeys(spec.regions or (spec.region,))), spec
    if not region:
        what = f"cluster {target!r}" if target else "the clusters"
        raise UsageError(f"which region is {what} in?",
                         "pass --region (or set AWS_REGION / a region in ~/.aws/config), "
                         "or give the spec file, whose regions are searched")
    return target, [region], None


def find_nodes(rt: Runtime, cluster: str, regions: Sequence[str]) -> tuple[str | None, list[Node]]:
    """The region holding the cluster's live nodes (first found) and those nodes."""
    for region in regions:
        nodes = instances.cluster_instances(rt.session, region, cluster)
        if nodes:
            return region, nodes
    return None, []


def ssh_cidr(spec: Spec) -> str:
    return spec.ssh.allowed_cidr or caller_cidr()


def key_name(spec: Spec) -> str:
    return spec.ssh.key_name or key_pair_name(spec.name)


def facts(rt: Runtime, spec: Spec, region: str, *,
          current: dict[str, str] | None) -> Facts:
    """Look up VPC and AMI. An AMI chosen by name is kept from the existing stack, so a
    newer AMI release never mixes AMIs within one cluster."""
    vpc = lookup.default_vpc(rt.session, region)
    if current and current.get("ImageId") and not spec.nodes.image.id:
        image, root = current["ImageId"], current.get("RootDeviceName", "/dev/sda1")
    else:
        image, root = lookup.resolve_image(rt.session, region, spec.nodes.image)
    return Facts(vpc_id=vpc, image_id=image, root_device=root, key_name=key_name(spec),
                 ssh_cidr=ssh_cidr(spec))


def key_pair_missing(rt: Runtime, spec: Spec, region: str) -> bool:
    """True when clusterkit must import the user's public key (spec names no key pair)."""
    if spec.ssh.key_name:
        if not keypairs.key_pair_exists(rt.session, region, spec.ssh.key_name):
            raise UsageError(f"EC2 key pair {spec.ssh.key_name!r} does not exist in {region}",
                             "create or import it, or remove ssh.key_name so clusterkit "
                             "imports your public key")
        return False
    return not keypairs.key_pair_exists(rt.session, region, key_pair_name(spec.name))


def base_tags(spec: Spec) -> dict[str, str]:
    return {**dict(spec.tags), CLUSTER_TAG: spec.name}
