"""`up`'s and `plan`'s one read of the world (plan.world.Observed): the cluster's
nodes, then, in the region it runs in or would be created in, the pinned resources, the
offer search (only when nodes are to be launched), the stack, VPC and subnets, AMI,
key pair and dataset snapshot. Read calls only; every decision is plan.up's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from clusterkit.aws import efs, iamprofiles, instances, lookup
from clusterkit.aws import stack as cfn
from clusterkit.aws.offers import search_offers
from clusterkit.catalog.ranking import Offer
from clusterkit.cluster.access.target import open_cluster
from clusterkit.cluster.dataset.checks import checked_snapshot
from clusterkit.cluster.provision import reserved
from clusterkit.cluster.provision.caller import ssh_source_cidr
from clusterkit.cluster.provision.cfnrole import stack_role
from clusterkit.cluster.provision.launch import first_candidate
from clusterkit.cluster.provision.lookups import facts, key_pair_missing
from clusterkit.cluster.provision.pins import checked_regions, pin_report, same_region
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, PlanDriftError
from clusterkit.kinds import StackAction
from clusterkit.plan.candidates import plan_candidates
from clusterkit.plan.nodes import Node, node_actions
from clusterkit.plan.profiles import iam_path
from clusterkit.plan.provision import EFS_OUTPUTS
from clusterkit.plan.region import region_plan
from clusterkit.plan.stack import StackRole, stack_name
from clusterkit.plan.world import (
    DatasetSeen,
    Observed,
    RegionSeen,
    StackSeen,
    node_differences,
    stack_differences,
)
from clusterkit.spec.model import Spec


def _offers(rt: Runtime, spec: Spec, regions: Sequence[str]) -> tuple[list[Offer], list[str]]:
    """The offer search in ``regions`` as it answered, and notes on what it could not
    reach (no offers at all: the spec's first type in the first region)."""
    notes: list[str] = []
    try:
        result = search_offers(rt.session, instance_types=spec.nodes.instance_types,
                               regions=regions, count=spec.nodes.count)
    except AwsError as exc:
        return [], [f"offer search failed ({exc}); using the spec's first type"]
    notes += [f"no offers from {where}: {why}" for where, why in
              sorted(result.region_errors.items())]
    return list(result.offers), notes


def _dataset(rt: Runtime, spec: Spec, region: str) -> DatasetSeen | None:
    """The spec's snapshot checked in ``region`` (UsageError, exit 2, when refused)."""
    ds = spec.storage.dataset
    if ds is None or not ds.snapshot:
        return None
    _, verdict = checked_snapshot(rt, ds.snapshot, region, ds.size_gb)
    return DatasetSeen(ds.snapshot, verdict.size_gib, tuple(verdict.warnings))


def survey_launch(rt: Runtime, spec: Spec, region: str | None, nodes: Sequence[Node],
                   allowed: Sequence[str]) -> Observed:
    """The nodes and, when nodes are to be launched, where they may go: pinned resources
    looked up in the cluster's region (or every allowed one), offers searched there (or
    the spec's capacity reservation read there instead). ``region`` of the returned record
    is where the rest is read."""
    seen = Observed(region or allowed[0], tuple(nodes), None, None, False)
    if not node_actions(spec.name, spec.nodes.count, nodes).launch:
        return seen  # nothing to place: the pinned resources and offers do not matter
    report = pin_report(rt, spec, [region] if region else allowed)
    notes = [f"pinned: {line}" for line in report.lines()]
    seen = replace(seen, regions=tuple(report.qualifying))
    if spec.nodes.reservation_id:  # it decides where: no offer search
        held = reserved.read(rt, spec, report.qualifying)
        return replace(seen, reservation=held, notes=tuple(notes), region=region or held.region)
    offers, search_notes = _offers(rt, spec, report.qualifying)
    fallback = None if offers else first_candidate(rt, replace(spec,
                                                               region=report.qualifying[0]))
    seen = replace(seen, offers=tuple(offers), fallback=fallback,
                   notes=(*notes, *search_notes))
    if region is None:  # a new cluster goes where its first candidate is
        first = plan_candidates(spec, seen)
        seen = replace(seen, region=first[0].region if first else allowed[0])
    return seen


def _region_seen(rt: Runtime, spec: Spec, region: str, cidr: str, *,
                 subnets: bool) -> RegionSeen:
    """A region's stack, the facts its parameters need, the key pair and (``subnets``)
    the VPC's subnet per AZ."""
    current = cfn.describe_stack(rt.session, region, stack_name(spec.name))
    found = facts(rt, spec, region, current=current["parameters"] if current else None,
                  ssh_cidr=cidr)
    return RegionSeen(region, StackSeen.of(current), found,
                      key_pair_missing(rt, spec, region),
                      lookup.subnets(rt.session, region, found.vpc_id) if subnets else {})


def survey_region(rt: Runtime, spec: Spec, seen: Observed) -> Observed:
    """The rest of the observation, in ``seen.region``: stack, VPC, AMI, kept EFS, key
    pair; subnets and the dataset snapshot when nodes are to be launched, and then each
    other region a candidate launches in; the stack's role when a stack is to change;
    the EFS mount targets when the cluster has a file system to mount."""
    launching = bool(node_actions(spec.name, spec.nodes.count, seen.nodes).launch)
    here = _region_seen(rt, spec, seen.region, ssh_source_cidr(spec), subnets=launching)
    seen = replace(seen, stack=here.stack, facts=here.facts,
                   key_pair_missing=here.key_pair_missing, subnets=here.subnets,
                   dataset=_dataset(rt, spec, seen.region) if launching else None)
    if launching:
        seen = replace(seen, elsewhere=tuple(
            _region_seen(rt, spec, region, here.facts.ssh_cidr, subnets=True)
            for region in _other_regions(spec, seen)))
    seen = _mount_targets(rt, spec, replace(seen, role=_role(rt, spec, seen)))
    return replace(seen, profiles=_profiles(rt, spec, seen, launching))


def _other_regions(spec: Spec, seen: Observed) -> list[str]:
    """The regions the candidates reach besides ``seen.region``, in candidate order."""
    regions = dict.fromkeys(o.region for o in plan_candidates(spec, seen))
    return [r for r in regions if r != seen.region]


def _stacks_change(spec: Spec, seen: Observed) -> bool:
    """Whether a stack is to be made or changed in some region."""
    assert seen.facts is not None
    regions = [region_plan(spec, seen.region, seen.stack, seen.facts, False, {}),
               *(region_plan(spec, r.region, r.stack, r.facts, False, {})
                 for r in seen.elsewhere)]
    return any(r.action != StackAction.NONE for r in regions)


def _role(rt: Runtime, spec: Spec, seen: Observed) -> StackRole | None:
    """The role the stack calls run as, looked up only when a stack is to be made or
    changed in some region (a no-op `up` reads nothing of IAM)."""
    return stack_role(rt, seen.region, warn=False) if _stacks_change(spec, seen) else None


def _profiles(rt: Runtime, spec: Spec, seen: Observed,
              launching: bool) -> dict[str, tuple[str, ...]] | None:
    """The cluster's instance profiles (one IAM list), read only when `up` launches,
    changes a stack, or finds a node of a cluster with EFS without a profile (a no-op
    `up` reads nothing of IAM)."""
    lacking = spec.storage.efs is not None and any(
        n.live and not n.instance_profile for n in seen.nodes)
    if not (launching or lacking or _stacks_change(spec, seen)):
        return None
    return iamprofiles.cluster_profiles(rt.session, iam_path(spec.name), seen.region)


def _mount_targets(rt: Runtime, spec: Spec, seen: Observed) -> Observed:
    """The subnets where the cluster's file system (the stack's, a kept one, or the
    spec's own ``file_system_id``) has a mount target; none read when the spec mounts
    none or the file system is new. On a file system the cluster does not own, each
    target's security groups too (``plan.mounts``: the one in the nodes' subnet is lent)."""
    efs_spec = spec.storage.efs
    outputs = seen.stack.outputs if seen.stack else {}
    fs_id = next((outputs[k] for k in EFS_OUTPUTS if outputs.get(k)), None) or (
        seen.facts.efs_id if seen.facts else "") or (efs_spec.file_system_id or ""
                                                    if efs_spec else "")
    if efs_spec is None or not fs_id:
        return seen
    if efs_spec.file_system_id:
        lent = efs.mount_targets(rt.session, seen.region, fs_id)
        return replace(seen, mount_targets=tuple(t.subnet_id for t in lent), lent_targets=lent)
    return replace(seen, mount_targets=tuple(efs.mount_target_subnets(rt.session, seen.region,
                                                                      fs_id)))


def survey_up(rt: Runtime, spec: Spec, only_region: str | None,
               on_nodes: Callable[[str | None, list[Node]], None] | None = None) -> Observed:
    """The whole observation: regions checked before any call, the nodes found by tag
    (``on_nodes`` sees them first: `up` refuses a spec it cannot apply before reading
    more), then the launch side and the region."""
    allowed = checked_regions(spec, only_region)
    region, nodes = open_cluster(spec).find(rt)
    same_region(spec, region, only_region)
    if on_nodes is not None:
        on_nodes(region, nodes)
    notes = [f"--region {only_region}: only {only_region} of the spec's regions"] \
        if only_region else []
    seen = survey_launch(rt, spec, region, nodes, allowed)
    return survey_region(rt, spec, replace(seen, notes=(*seen.notes, *notes)))


def recheck(rt: Runtime, spec: Spec, observed: Observed) -> None:
    """Read the nodes and the stack again, after the user was asked; PlanDriftError
    (exit 1, nothing changed) naming every difference from what the plan was made of."""
    region = observed.region
    now = replace(observed,
                  nodes=tuple(instances.cluster_instances(rt.session, region, spec.name)),
                  stack=StackSeen.of(cfn.describe_stack(rt.session, region,
                                                        stack_name(spec.name))))
    changed = node_differences(observed, now) + stack_differences(observed, now)
    if changed:
        raise drift_error(spec, changed)


def drift_error(spec: Spec, changed: Sequence[str], again: str = "") -> PlanDriftError:
    """PlanDriftError naming each change; ``again``: how to plan afresh (default: run
    `clusterkit up` again)."""
    return PlanDriftError(
        f"cluster {spec.name} changed since the plan was made, so it is not applied:\n"
        + "\n".join(f"  {line}" for line in changed),
        f"nothing was changed: {again or 'run `clusterkit up` again'} to plan from what is "
        "there now (another `up` or `down` of the cluster may be running)")
