"""`clusterkit down`: observe (the cluster's resources by tag in every region searched) ->
``plan.down.plan_down`` (shown, confirmed) -> apply the plan per region, in its order, then
IAM once the stacks are gone. A world that changed while the user read the question stops
it with nothing deleted. Safe to run twice and after a crashed `up`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.aws import addresses, instances, keypairs, teardown, volumes
from clusterkit.aws import stack as cfn
from clusterkit.cluster.access import record
from clusterkit.cluster.access.target import open_cluster, per_region, search_regions
from clusterkit.cluster.jobs import retire
from clusterkit.cluster.provision import efsaccess, profiles, saveddown, stackops
from clusterkit.cluster.provision.locks import cluster_lock
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import (
    AwsError,
    ClusterkitError,
    CredentialsError,
    PlanDriftError,
    UsageError,
)
from clusterkit.events import Kind, Stage
from clusterkit.kinds import InstanceState
from clusterkit.plan.down import (
    DownObserved,
    DownPlan,
    IamNames,
    IamSeen,
    KeptEfs,
    RegionPlan,
    RegionSeen,
    Resource,
    Verdict,
    controller_hosts,
    instance_drift,
    plan_down,
    plan_iam,
)
from clusterkit.plan.stack import stack_name
from clusterkit.remote import known_hosts, sshhosts

SG_BUSY = ("DependencyViolation", "InvalidGroup.InUse")


@dataclass(frozen=True)
class DownResult:
    """What `down` found and deleted: per region, resource kind -> ids; and the EFS file
    systems the cluster keeps (deletion_policy: retain), priced."""

    cluster: str
    regions: list[str]
    deleted: dict[str, dict[str, list[str]]]
    kept_efs: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "regions": self.regions, "deleted": self.deleted,
                "kept_efs": self.kept_efs}


# -- observe ------------------------------------------------------------------------------

def survey_region(rt: Runtime, cluster: str, region: str) -> RegionSeen:
    """What the cluster has in ``region`` (IAM, which is global, is read apart)."""
    s = rt.session
    fss = teardown.file_systems(s, region, cluster)
    nodes = instances.cluster_instances(s, region, cluster)
    stack = _stack(rt, region, cluster)
    groups = teardown.security_groups(s, region, cluster)
    yours = (stack or {}).get("parameters", {}).get("ExistingFileSystemId", "")
    yours = "" if yours in {f["id"] for f in fss} else yours  # a kept one is the cluster's
    return RegionSeen.of(region, {
        Resource.CONTROLLER: controller_hosts({n.instance_id: n.instance_profile for n in nodes
                                               if n.state == InstanceState.RUNNING}),
        Resource.INSTANCES: [n.instance_id for n in nodes],
        Resource.VOLUMES: [v["id"] for v in volumes.cluster_volumes(s, region, cluster)],
        Resource.LENT_MOUNT_TARGETS: efsaccess.lent_to(rt, region, yours, groups),
        Resource.STACK: [stack_name(cluster)] if stack else [],
        Resource.SECURITY_GROUPS: groups,
        Resource.LAUNCH_TEMPLATES: teardown.launch_templates(s, region, cluster),
        Resource.PLACEMENT_GROUPS: teardown.placement_groups(s, region, cluster),
        Resource.ADDRESSES: addresses.allocation_ids(s, region, cluster),
        Resource.KEY_PAIRS: keypairs.cluster_key_pairs(s, region, cluster),
    }, fss, [n.instance_id for n in nodes if n.state == InstanceState.SHUTTING_DOWN])


def observe(rt: Runtime, cluster: str, searched: Sequence[str]) -> DownObserved:
    """One read of the cluster in ``searched`` (in parallel); its IAM names only when no
    region holds anything (they then say whether the cluster exists at all)."""
    seen = per_region(searched, lambda r: survey_region(rt, cluster, r))
    empty = not any(r.found or r.kept_efs for r in seen.values())
    iam = _iam_names(rt, cluster) if empty else None
    return DownObserved(cluster, tuple(searched), tuple(seen.values()),
                        record.read(cluster) is not None, iam)


def _stack(rt: Runtime, region: str, cluster: str) -> dict[str, Any] | None:
    return cfn.describe_stack(rt.session, region, stack_name(cluster))


# -- apply --------------------------------------------------------------------------------

def _deleted(rt: Runtime, kind: str, ident: str) -> None:
    rt.emit(Kind.PROGRESS, f"deleted {kind} {ident}", stage=Stage.DOWN, level=1)


def _still(planned: Sequence[str], listed: Callable[[], list[str]]) -> list[str]:
    """Those of ``planned`` still there (listed only when the plan names any): the stack
    deletes most of what it made, and nothing the plan did not show is deleted."""
    return [i for i in listed() if i in planned] if planned else []


def _instances(rt: Runtime, cluster: str, rp: RegionPlan, deadline: float) -> None:
    """Fleets and spot requests first (they would launch again), then the planned
    instances, waited until terminated."""
    s, region = rt.session, rp.region
    for fleet in instances.cluster_fleets(s, region, cluster):
        instances.delete_fleets(s, region, [fleet])
        _deleted(rt, "fleet", fleet)
    ids = list(rp.ids(Resource.INSTANCES))
    requests = instances.cluster_spot_requests(s, region, cluster, ids)
    if requests:
        instances.cancel_spot_requests(s, region, requests)
        for r in requests:
            _deleted(rt, "spot request", r)
    instances.terminate_instances(s, region, [i for i in ids if i not in rp.ending])
    for iid in ids:
        rt.emit(Kind.PROGRESS, f"terminating instance {iid}", stage=Stage.DOWN, level=1)

    def left() -> tuple[bool, list[str]]:
        alive = [n.instance_id for n in instances.describe_nodes(s, region, ids)
                 if n.state != InstanceState.TERMINATED]
        return not alive, alive

    if ids:
        rt.wait_until(left, deadline=deadline, late=lambda alive: AwsError(
            f"instances not terminated in time: {', '.join(alive)}",
            "run `clusterkit down` again"))
    for iid in ids:
        _deleted(rt, "instance", iid)


def _volumes(rt: Runtime, cluster: str, rp: RegionPlan, deadline: float) -> None:
    """The planned volumes left once the instances are gone (a root volume goes with its
    instance), detached first where something still holds them."""
    planned = rp.ids(Resource.VOLUMES)
    listed = volumes.cluster_volumes(rt.session, rp.region, cluster) if planned else []
    for vol in (v for v in listed if v["id"] in planned):
        if vol["attached_to"]:
            volumes.detach_volume(rt.session, rp.region, vol["id"], vol["attached_to"][0])
        _retry(rt, deadline, lambda v=vol["id"]: volumes.delete_volume(rt.session, rp.region, v),
               ("VolumeInUse", "IncorrectState"))
        _deleted(rt, "volume", vol["id"])


def _retry(rt: Runtime, deadline: float, call: Callable[[], Any], busy: Sequence[str]) -> Any:
    """Call until it stops failing with a 'still in use' code, or the deadline (then the
    last such error)."""
    def probe() -> tuple[bool, Any]:
        try:
            return True, call()
        except AwsError as exc:
            if exc.code not in busy:
                raise
            return False, exc

    return rt.wait_until(probe, deadline=deadline, late=lambda exc: exc)


def _mount_targets(rt: Runtime, region: str, fs_ids: Sequence[str], deadline: float) -> None:
    """Mount targets first: clusterkit made them, and the file system (and the security
    group they use) cannot be deleted while they exist."""
    s = rt.session
    for fs_id in fs_ids:
        targets = teardown.mount_targets(s, region, fs_id)
        for mt in targets:
            teardown.delete_mount_target(s, region, mt)
            _deleted(rt, "EFS mount target", mt)
        if targets:
            rt.wait_until(lambda f=fs_id: (not teardown.mount_targets(s, region, f), f),
                          deadline=deadline, late=lambda f: AwsError(
                              f"EFS mount targets of {f} not deleted in time",
                              "run `clusterkit down` again"))


def _efs(rt: Runtime, cluster: str, rp: RegionPlan, deadline: float,
         kept: Sequence[KeptEfs]) -> None:
    s, region = rt.session, rp.region
    for fs in kept:
        rt.warn(f"kept EFS {fs.describe()} (storage.efs.deletion_policy: retain): the next "
                f"`up` of this cluster mounts it; `clusterkit down {cluster} --delete-efs` "
                "deletes it", level=1, stage=Stage.DOWN)
    planned = (*rp.ids(Resource.EFS), *rp.ids(Resource.KEPT_EFS))
    left = _still(planned, lambda: [f["id"] for f in teardown.file_systems(s, region, cluster)])
    _mount_targets(rt, region, left, deadline)
    for fs_id in left:
        _retry(rt, deadline, lambda f=fs_id: teardown.delete_file_system(s, region, f),
               ("FileSystemInUse",))
        _deleted(rt, "EFS file system", fs_id)


# what the sweep lists again and deletes, after the EFS: kind, word, list, delete, busy codes
SWEPT = ((Resource.LAUNCH_TEMPLATES, "launch template", teardown.launch_templates,
          teardown.delete_launch_template, ()),
         (Resource.PLACEMENT_GROUPS, "placement group", teardown.placement_groups,
          teardown.delete_placement_group, ()),
         (Resource.ADDRESSES, "Elastic IP", addresses.allocation_ids,
          addresses.release_address, ()),
         (Resource.SECURITY_GROUPS, "security group", teardown.security_groups,
          teardown.delete_security_group, SG_BUSY),
         (Resource.KEY_PAIRS, "key pair", keypairs.cluster_key_pairs, keypairs.delete_key_pair, ()))


def _sweep(rt: Runtime, cluster: str, rp: RegionPlan, deadline: float,
           kept: Sequence[KeptEfs]) -> None:
    """What the plan names that the stack's delete left (or no stack held)."""
    s, region = rt.session, rp.region
    _efs(rt, cluster, rp, deadline, kept)
    for kind, word, listed, delete, busy in SWEPT:
        for ident in _still(rp.ids(kind), lambda f=listed: f(s, region, cluster)):
            _retry(rt, deadline, lambda d=delete, i=ident: d(s, region, i), busy)
            _deleted(rt, word, ident)


def down_region(rt: Runtime, cluster: str, rp: RegionPlan, *, timeout: float,
                kept: Sequence[KeptEfs] = ()) -> None:
    """Apply ``rp``; ``kept``: the kept file systems of its region (said, not deleted)."""
    deadline = rt.clock() + timeout
    for master in rp.ids(Resource.CONTROLLER):  # before anything it would replace
        retire.stop(rt, cluster, rp.region, master)
    _instances(rt, cluster, rp, deadline)
    _volumes(rt, cluster, rp, deadline)
    efsaccess.give_back_all(rt, rp.region, rp.ids(Resource.LENT_MOUNT_TARGETS),
                            rp.ids(Resource.SECURITY_GROUPS), deadline)
    _mount_targets(rt, rp.region, rp.file_systems, deadline)
    status = None
    if rp.ids(Resource.STACK):
        profiles.delete(rt, cluster, rp.region)  # they hold the stack's roles
        status = stackops.delete(rt, rp.region, stack_name(cluster), timeout=timeout)
    if status is not None:
        _deleted(rt, "stack", f"{stack_name(cluster)} ({status})")
    _sweep(rt, cluster, rp, deadline, kept)
    if status is not None and status != "DELETE_COMPLETE":  # retry once the sweep freed it
        stackops.delete(rt, rp.region, stack_name(cluster), timeout=timeout)


def _unchanged(rt: Runtime, cluster: str, plan: DownPlan) -> None:
    """After the question: the planned regions' instances read again; PlanDriftError
    (exit 1, nothing deleted) naming each one that appeared or vanished meanwhile."""
    now = per_region([r.region for r in plan.regions], lambda region: [
        n.instance_id for n in instances.cluster_instances(rt.session, region, cluster)])
    changed = instance_drift(plan, now)
    if changed:
        raise PlanDriftError(
            f"cluster {cluster} changed since the plan was shown, so nothing was deleted:\n"
            + "\n".join(f"  {line}" for line in changed),
            f"run `clusterkit down {cluster}` again: it shows what is there now (another "
            "`up` or `down` of the cluster may be running)")


# -- IAM (global) -------------------------------------------------------------------------

def _stack_regions(rt: Runtime, cluster: str, regions: Sequence[str]) -> set[str]:
    """The regions (of ``regions``, every enabled one when empty) where the cluster's
    stack still exists."""
    found = per_region(search_regions(rt, regions), lambda r: _stack(rt, r, cluster))
    return {r for r, st in found.items() if st}


def _iam_region(rt: Runtime, cluster: str) -> str | None:
    """The region IAM calls are signed for: the session's, else the cluster's own (its
    record's), as a custom endpoint with no AWS_REGION has none."""
    rec = None if rt.session.region_name else record.read(cluster)
    return rt.session.region_name or (rec.region if rec else None)


def _iam_names(rt: Runtime, cluster: str) -> IamNames:
    """The cluster's IAM roles and instance profiles (listed once per `down`)."""
    region = _iam_region(rt, cluster)
    return IamNames(tuple(teardown.iam_roles(rt.session, cluster, region)),
                    tuple(teardown.instance_profiles(rt.session, cluster, region)))


def _iam(rt: Runtime, cluster: str, names: IamNames | None = None) -> list[str]:
    """Delete the cluster's IAM role / instance profile (global) where no stack still
    uses them (``plan_iam``). ``names``: ``_iam_names``, when already listed. Returns what
    was kept, and why."""
    s, region = rt.session, _iam_region(rt, cluster)
    names = names if names is not None else _iam_names(rt, cluster)
    seen = IamSeen({r: teardown.role_region(s, r, region) for r in names.roles},
                   {p: tuple(teardown.profile_roles(s, p, region)) for p in names.profiles})
    if not seen:
        return []
    live = _stack_regions(rt, cluster, seen.stack_regions())
    iam = plan_iam(seen, live)
    for prof in iam.profiles:
        _delete_iam(rt, "instance profile", prof, teardown.delete_instance_profile, region)
    for role in iam.roles:
        _delete_iam(rt, "IAM role", role, teardown.delete_role, region)
    if iam.kept:
        rt.warn(f"kept {', '.join(iam.kept)}: the cluster's stack in "
                f"{', '.join(sorted(live))} still uses them", level=1, stage=Stage.DOWN)
    return list(iam.kept)


def _delete_iam(rt: Runtime, kind: str, name: str, delete: Callable[[Any, str, str | None], None],
                region: str | None) -> None:
    """A leftover of a stack whose delete failed. The user's policy has no IAM write
    (`clusterkit iam-policy`): the service role deletes the stack's roles, so a refusal
    here is said and left, not a failure of the whole `down`."""
    try:
        delete(rt.session, name, region)
    except CredentialsError as err:
        rt.warn(f"left {kind} {name} ({err.message}): clusterkit's user policy has no IAM "
                "write; an administrator deletes it (`aws iam`), or the service role with "
                "the stack", level=1, stage=Stage.DOWN)
        return
    _deleted(rt, kind, name)


def _confirm(plan: DownPlan, *, yes: bool, confirm: Callable[[str], bool] | None) -> None:
    """Declining (or no answer: Ctrl-C) is exit 1 with nothing deleted; no terminal to
    ask on (``confirm`` None) without ``yes`` is exit 2, as for `up`."""
    if yes:
        return
    if confirm is None:
        raise UsageError(f"`down` would delete cluster {plan.cluster} and there is no "
                         "terminal to ask on: nothing deleted",
                         "pass --yes to delete without asking")
    if confirm(plan.question()):
        return
    raise ClusterkitError(f"not confirmed: nothing deleted of cluster {plan.cluster}",
                          "answer yes, or pass --yes to skip the question")


def _forget(rt: Runtime, cluster: str, searched: Sequence[str], iam_kept: bool) -> bool:
    """Drop the local state (record, host keys) unless the cluster may live on elsewhere:
    its record names regions this `down` did not search (``--region`` narrowed it), or
    its IAM role is kept for a stack in another region. True when dropped. The
    cluster's entries for the user's ssh (``ssh NAME``) go either way: its nodes here
    are gone."""
    sshhosts.remove(cluster)
    rec = record.read(cluster)
    unsearched = [r for r in (rec.search if rec else ()) if r not in searched]
    if unsearched or iam_kept:
        where = f" in {', '.join(unsearched)}" if unsearched else " in another region"
        rt.info(f"kept the local record of cluster {cluster}: it may still have resources"
                f"{where} (`clusterkit down {cluster}` without --region searches them)")
        return False
    known_hosts.forget(cluster)
    return True


def _left(rt: Runtime, plan: DownPlan) -> DownPlan:
    """What is still there after the teardown, as a plan of the planned regions (kept EFS
    aside unless deleted)."""
    after = per_region([r.region for r in plan.regions],
                       lambda r: survey_region(rt, plan.cluster, r))
    return plan_down(DownObserved(plan.cluster, plan.searched, tuple(after.values()), True),
                     plan.delete_efs)


def down(rt: Runtime, cluster: str, regions: Sequence[str], **options: Any) -> DownResult:
    """`down` of ``cluster``, one `up` or `down` at a time per cluster on this machine."""
    with cluster_lock(cluster, "down"):
        return _down(rt, cluster, regions, **options)


def _nothing(rt: Runtime, plan: DownPlan, result: DownResult) -> DownResult:
    """No resource in any region searched: an unknown name is an error; a known cluster
    has its IAM leftovers cleaned and its local state dropped."""
    if plan.verdict is Verdict.NO_SUCH_CLUSTER:
        raise ClusterkitError(plan.summary(), "check the name: `clusterkit status` lists your "
                              "clusters (and `--region` narrows the search)")
    iam_kept = _iam(rt, plan.cluster, plan.iam)
    rt.done(Stage.DOWN, plan.summary())
    for line in plan.lines():
        rt.info(line)
    _forget(rt, plan.cluster, plan.searched, bool(iam_kept))
    return result


def _down(rt: Runtime, cluster: str, regions: Sequence[str], *, yes: bool,
          confirm: Callable[[str], bool] | None = None, timeout: float = 1800.0,
          delete_efs: bool = False, out: str | None = None,
          saved: tuple[str, DownPlan] | None = None) -> DownResult:
    """Delete the cluster in every region of ``regions`` (every enabled region when
    empty, searched in parallel) where it has anything. ``out``: save the plan there
    and delete nothing; ``saved`` (its file, the plan): delete exactly that plan, once
    the cluster is read again and found as it was."""
    searched = search_regions(rt, regions)
    plan = plan_down(observe(rt, cluster, searched), delete_efs)
    if saved is not None:
        saveddown.check(saved[0], saved[1], plan)
        plan, yes = saved[1], True  # applied as saved: the user read it already
    result = DownResult(cluster, searched, plan.deleted(),
                        [fs.priced() for fs in plan.kept_efs])
    if out is not None:
        for line in plan.lines():
            rt.info(line)
        saveddown.save(out, plan)
        rt.info(f"saved the plan to {out}: `clusterkit down --plan {out}` applies it")
        return result
    if not plan.todo:
        return _nothing(rt, plan, result)
    for line in plan.lines():
        rt.info(line)
    _confirm(plan, yes=yes, confirm=confirm)
    if not yes:  # the user took time to answer: the world may have moved
        _unchanged(rt, cluster, plan)
    for rp in plan.regions:
        rt.started(Stage.DOWN, f"deleting cluster {cluster} in {rp.region}")
        down_region(rt, cluster, rp, timeout=timeout,
                    kept=[fs for fs in plan.kept_efs if fs.region == rp.region])
    iam_kept = _iam(rt, cluster)
    left = _left(rt, plan)
    if left.todo:
        raise AwsError(f"cluster {cluster} is not gone: still there: " + "; ".join(
            f"{r.region}: {d.kind} {', '.join(d.ids)}" for r in left.regions for d in r.deletions),
            f"run `clusterkit down {cluster}` again")
    kept = f" (kept: {len(result.kept_efs)} EFS file system(s))" if result.kept_efs else ""
    if _forget(rt, cluster, searched, bool(iam_kept)):
        rt.done(Stage.DOWN, f"cluster {cluster} is gone{kept}")
    else:
        rt.done(Stage.DOWN, f"cluster {cluster} is deleted in "
                f"{', '.join(r.region for r in plan.regions)}{kept}")
    return result


def do_down(target: str | None, *, yes: bool, region: str | None = None,
            profile: str | None = None, rt: Runtime | None = None,
            confirm: Callable[[str], bool] | None = None, timeout: float = 1800.0,
            delete_efs: bool = False, out: str | None = None,
            plan_file: str | None = None) -> DownResult:
    """``region``: an explicit --region, narrowing the search to it. Without it the
    local record says where the cluster is, else every enabled region is searched.
    ``out``: save the plan, delete nothing; ``plan_file``: apply a saved plan (its
    cluster, regions and --delete-efs are the plan's)."""
    if plan_file is not None:
        if target is not None or out is not None or delete_efs:
            raise UsageError("--plan applies a saved plan: no NAME, --out or --delete-efs "
                             "(the plan holds them)", "`clusterkit down --plan FILE`")
        saved = saveddown.load(plan_file)  # exit 2 before any AWS call
        rt = rt or Runtime.make(region=region, profile=profile)
        return down(rt, saved.cluster, list(saved.searched), yes=True, timeout=timeout,
                    delete_efs=saved.delete_efs, saved=(plan_file, saved))
    if target is None:
        raise UsageError("`down` needs a SPEC or NAME, or --plan FILE",
                         "`clusterkit down NAME` (see `clusterkit down --help`)")
    rt = rt or Runtime.make(region=region, profile=profile)
    ref = open_cluster(target, region)
    cluster, regions = ref.name, list(ref.regions)
    assert cluster is not None
    return down(rt, cluster, regions, yes=yes, confirm=confirm, timeout=timeout,
                delete_efs=delete_efs, out=out)
