"""Which cluster a command means: a NAME or a spec file -> the cluster's name, the
regions to look in, the spec; and finding its nodes by tag in those regions."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from clusterkit import statedir
from clusterkit.cluster.access import record
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.plan.nodes import Node
from clusterkit.spec.model import Spec

T = TypeVar("T")
SEARCH_THREADS = 16  # regions searched at once (about 17-30 are enabled)


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


@dataclass(frozen=True)
class ClusterRef:
    """Which cluster a command means: its name (None: every cluster, for `status`), the
    regions to look in (empty: every enabled region), and its spec when one was given."""

    name: str | None
    regions: tuple[str, ...]
    spec: Spec | None = None

    def find(self, rt: Runtime) -> tuple[str | None, list[Node]]:
        """The region of its live nodes and those nodes (``find_nodes``)."""
        return find_nodes(rt, self.name or "", self.regions)


def open_cluster(target: str | Spec | None, region: str | None = None) -> ClusterRef:
    """The one way every command opens its cluster, before any AWS call: a NAME or a spec
    file (``resolve_target``'s rules: ``region``, the explicit --region, narrows the
    search to itself; else the spec's regions and its local record's), or the spec a
    command that creates (`up`, `plan`, `deploy-dataset`) loaded: its own regions only,
    where it may create."""
    if isinstance(target, Spec):
        return ClusterRef(target.name, tuple(target.regions or (target.region,)), target)
    name, regions, spec = resolve_target(target, region)
    return ClusterRef(name, tuple(regions), spec)


def search_regions(rt: Runtime, regions: Sequence[str]) -> list[str]:
    """``regions``, or every region enabled for the account when it is empty."""
    if regions:
        return list(regions)
    from clusterkit.aws.regions import enabled_regions  # boto3 only when AWS is asked

    return enabled_regions(rt.session)


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
    from clusterkit.aws import instances

    found = per_region(search_regions(rt, regions),
                       lambda r: instances.cluster_instances(rt.session, r, cluster))
    for region, nodes in found.items():
        if nodes:
            return region, nodes
    return None, []
