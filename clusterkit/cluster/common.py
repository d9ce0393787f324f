"""Shared pieces of the provisioning commands: the runtime, finding a cluster by tag,
and the facts the stack parameters need."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rich.console import Console

from clusterkit import statedir
from clusterkit.aws import instances, keypairs, lookup
from clusterkit.aws.identity import caller_cidr
from clusterkit.aws.regions import enabled_regions
from clusterkit.aws.session import make_session
from clusterkit.cluster import record
from clusterkit.errors import UsageError
from clusterkit.plan.nodes import CLUSTER_TAG, Node
from clusterkit.plan.stack import Facts, key_pair_name
from clusterkit.spec.model import Spec

T = TypeVar("T")
SEARCH_THREADS = 16  # regions searched at once (about 17-30 are enabled)

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


def looks_like_path(target: str) -> bool:
    """A command-line target meant as a file: has a ``/``, ends in .yaml/.yml, or starts
    with ``.`` or ``~``."""
    return "/" in target or target.endswith((".yaml", ".yml")) or target.startswith((".", "~"))


def check_target(target: str | None) -> bool:
    """Check a NAME-or-spec argument before anything else uses it; True when it is a spec
    file. A path must be an existing file, anything else a cluster name (UsageError,
    exit 2, otherwise)."""
    if target is None:
        return False
    if looks_like_path(target):
        if not os.path.isfile(os.path.expanduser(target)):
            raise UsageError(f"{target!r} is not a cluster name, nor an existing spec file",
                             "give the path of an existing spec file, or a cluster name "
                             f"({statedir.NAME_RULE})")
        return True
    statedir.check_name(target)
    return False


def resolve_target(target: str | None, region: str | None,
                   ) -> tuple[str | None, list[str], Spec | None]:
    """A cluster NAME or a spec file -> (cluster name, regions to look in, the spec when a
    file was given). ``region`` is an explicit ``--region``: it narrows the search to
    itself. Otherwise a spec file gives its regions (and its local record's), a NAME its
    local record's regions; an empty list means "search every enabled region"
    (``search_regions``)."""
    if target and check_target(target):
        from clusterkit.spec import load

        spec = load(os.path.expanduser(target))
        if region:
            return spec.name, [region], spec
        rec = record.read(spec.name)
        regions = [*(spec.regions or (spec.region,)), *(rec.search if rec else ())]
        return spec.name, list(dict.fromkeys(regions)), spec
    if region:
        return target, [region], None
    rec = record.read(target) if target else None
    return target, rec.search if rec else [], None


def search_regions(rt: Runtime, regions: Sequence[str]) -> list[str]:
    """``regions``, or every region enabled for the account when it is empty."""
    return list(regions) if regions else enabled_regions(rt.session)


def per_region(regions: Sequence[str], call: Callable[[str], T]) -> dict[str, T]:
    """``call(region)`` for every region at once (threads: each is a few AWS round trips);
    results in the order of ``regions``. The first failure is raised."""
    if len(regions) <= 1:
        return {r: call(r) for r in regions}
    with ThreadPoolExecutor(max_workers=min(SEARCH_THREADS, len(regions))) as pool:
        futures = {r: pool.submit(call, r) for r in regions}
        return {r: futures[r].result() for r in regions}


def find_nodes(rt: Runtime, cluster: str, regions: Sequence[str]) -> tuple[str | None, list[Node]]:
    """The region holding the cluster's live nodes (the first of ``regions`` that has
    any; every enabled region when ``regions`` is empty) and those nodes. The regions
    are searched in parallel."""
    found = per_region(search_regions(rt, regions),
                       lambda r: instances.cluster_instances(rt.session, r, cluster))
    for region, nodes in found.items():
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
    newer AMI release never mixes AMIs within one cluster. A file system the cluster
    kept (``deletion_policy: retain``) is mounted again instead of making another."""
    from clusterkit.cluster.kept_efs import reuse_id

    vpc = lookup.default_vpc(rt.session, region)
    if current and current.get("ImageId") and not spec.nodes.image.id:
        image, root = current["ImageId"], current.get("RootDeviceName", "/dev/sda1")
    else:
        image, root = lookup.resolve_image(rt.session, region, spec.nodes.image)
    return Facts(vpc_id=vpc, image_id=image, root_device=root, key_name=key_name(spec),
                 ssh_cidr=ssh_cidr(spec), efs_id=reuse_id(rt, spec, region, current))


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
