"""`clusterkit down`: delete everything a cluster owns, found by tag, in order:
spot requests and fleets, instances (waited), volumes, the stack (waited), then a sweep
of every tagged resource still there. Safe to run twice and after a crashed `up`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.aws import instances, keypairs, teardown, volumes
from clusterkit.cluster import kept_efs, record, stackops
from clusterkit.cluster.locks import cluster_lock
from clusterkit.cluster.runtime import Runtime
from clusterkit.cluster.target import per_region, resolve_target, search_regions
from clusterkit.errors import AwsError, ClusterkitError, CredentialsError, UsageError
from clusterkit.events import Kind, Stage
from clusterkit.kinds import InstanceState
from clusterkit.plan.stack import stack_name
from clusterkit.remote import known_hosts

SG_BUSY = ("DependencyViolation", "InvalidGroup.InUse")


KEPT = "EFS kept (retain)"


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


def inventory(rt: Runtime, cluster: str, region: str) -> dict[str, list[str]]:
    """What the cluster has in ``region`` (IAM, which is global, is handled apart)."""
    s = rt.session
    fss = teardown.file_systems(s, region, cluster)
    inv = {
        "instances": [n.instance_id for n in instances.cluster_instances(s, region, cluster)],
        "volumes": [v["id"] for v in volumes.cluster_volumes(s, region, cluster)],
        "stack": [stack_name(cluster)] if _stack(rt, region, cluster) else [],
        "security groups": teardown.security_groups(s, region, cluster),
        "launch templates": teardown.launch_templates(s, region, cluster),
        "placement groups": teardown.placement_groups(s, region, cluster),
        "EFS file systems": [f["id"] for f in fss if not f["retain"]],
        KEPT: [f["id"] for f in fss if f["retain"]],
        "key pairs": keypairs.cluster_key_pairs(s, region, cluster),
    }
    return {k: v for k, v in inv.items() if v}


def _to_delete(inv: dict[str, list[str]], delete_efs: bool) -> dict[str, list[str]]:
    return {k: v for k, v in inv.items() if delete_efs or k != KEPT}


def _stack(rt: Runtime, region: str, cluster: str) -> dict[str, Any] | None:
    from clusterkit.aws import stack as cfn

    return cfn.describe_stack(rt.session, region, stack_name(cluster))


def _deleted(rt: Runtime, kind: str, ident: str) -> None:
    rt.emit(Kind.PROGRESS, f"deleted {kind} {ident}", stage=Stage.DOWN, level=1)


def _instances(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    s = rt.session
    for fleet in instances.cluster_fleets(s, region, cluster):
        instances.delete_fleets(s, region, [fleet])
        _deleted(rt, "fleet", fleet)
    live = instances.cluster_instances(s, region, cluster)
    ids = [n.instance_id for n in live]
    requests = instances.cluster_spot_requests(s, region, cluster, ids)
    if requests:
        instances.cancel_spot_requests(s, region, requests)
        for r in requests:
            _deleted(rt, "spot request", r)
    todo = [n.instance_id for n in live if n.state != InstanceState.SHUTTING_DOWN]
    if todo:
        instances.terminate_instances(s, region, todo)
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


def _volumes(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    for vol in volumes.cluster_volumes(rt.session, region, cluster):
        if vol["attached_to"]:
            volumes.detach_volume(rt.session, region, vol["id"], vol["attached_to"][0])
        _retry(rt, deadline, lambda v=vol["id"]: volumes.delete_volume(rt.session, region, v),
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


def _mount_targets(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    """Mount targets first: clusterkit made them, and the file system (and the security
    group they use) cannot be deleted while they exist."""
    s = rt.session
    for fs in teardown.file_systems(s, region, cluster):
        targets = teardown.mount_targets(s, region, fs["id"])
        for mt in targets:
            teardown.delete_mount_target(s, region, mt)
            _deleted(rt, "EFS mount target", mt)
        if targets:
            rt.wait_until(lambda fs_id=fs["id"]: (not teardown.mount_targets(s, region, fs_id),
                                                  fs_id),
                          deadline=deadline, late=lambda fs_id: AwsError(
                              f"EFS mount targets of {fs_id} not deleted in time",
                              "run `clusterkit down` again"))


def _efs(rt: Runtime, cluster: str, region: str, deadline: float, delete_efs: bool) -> None:
    s = rt.session
    _mount_targets(rt, cluster, region, deadline)
    for fs in teardown.file_systems(s, region, cluster):
        if fs["retain"] and not delete_efs:
            rt.warn(f"kept EFS {kept_efs.describe(kept_efs.priced(fs))} "
                    "(storage.efs.deletion_policy: retain): the next `up` of this cluster "
                    f"mounts it; `clusterkit down {cluster} --delete-efs` deletes it",
                    level=1, stage=Stage.DOWN)
            continue
        _retry(rt, deadline, lambda f=fs["id"]: teardown.delete_file_system(s, region, f),
               ("FileSystemInUse",))
        _deleted(rt, "EFS file system", fs["id"])


def _sweep(rt: Runtime, cluster: str, region: str, deadline: float,
           delete_efs: bool = False) -> None:
    s = rt.session
    _efs(rt, cluster, region, deadline, delete_efs)
    for lt in teardown.launch_templates(s, region, cluster):
        teardown.delete_launch_template(s, region, lt)
        _deleted(rt, "launch template", lt)
    for pg in teardown.placement_groups(s, region, cluster):
        teardown.delete_placement_group(s, region, pg)
        _deleted(rt, "placement group", pg)
    for sg in teardown.security_groups(s, region, cluster):
        _retry(rt, deadline, lambda g=sg: teardown.delete_security_group(s, region, g), SG_BUSY)
        _deleted(rt, "security group", sg)
    for key in keypairs.cluster_key_pairs(s, region, cluster):
        keypairs.delete_key_pair(s, region, key)
        _deleted(rt, "key pair", key)


def _stack_regions(rt: Runtime, cluster: str, regions: Sequence[str]) -> set[str]:
    """The regions (of ``regions``, every enabled one when empty) where the cluster's
    stack still exists."""
    found = per_region(search_regions(rt, regions), lambda r: _stack(rt, r, cluster))
    return {r for r, st in found.items() if st}


def _iam_names(rt: Runtime, cluster: str) -> tuple[list[str], list[str]]:
    """The cluster's IAM roles and instance profiles (listed once per `down`)."""
    return (teardown.iam_roles(rt.session, cluster),
            teardown.instance_profiles(rt.session, cluster))


def _iam(rt: Runtime, cluster: str,
         names: tuple[list[str], list[str]] | None = None) -> list[str]:
    """Delete the cluster's IAM role / instance profile (global) only where no stack
    still uses them: a role tagged with its stack's region goes once that region's stack
    is gone; an untagged role (made before the tag) or a profile without a role only once
    no enabled region has the stack. ``names``: ``_iam_names``, when already listed.
    Returns what was kept, and why."""
    s = rt.session
    role_names, profile_names = names or _iam_names(rt, cluster)
    roles = {r: teardown.role_region(s, r) for r in role_names}
    profiles = {p: teardown.profile_roles(s, p) for p in profile_names}
    if not roles and not profiles:
        return []
    everywhere = None in roles.values() or not all(profiles.values())
    live = _stack_regions(rt, cluster, [] if everywhere else sorted(set(roles.values())))

    def free(role: str) -> bool:
        region = roles.get(role)
        return region not in live if region else not live

    kept: list[str] = []
    for prof, its_roles in profiles.items():
        if all(free(r) for r in its_roles) if its_roles else not live:
            _delete_iam(rt, "instance profile", prof, teardown.delete_instance_profile)
        else:
            kept.append(f"instance profile {prof}")
    for role in roles:
        if free(role):
            _delete_iam(rt, "IAM role", role, teardown.delete_role)
        else:
            kept.append(f"IAM role {role}")
    if kept:
        rt.warn(f"kept {', '.join(kept)}: the cluster's stack in "
                f"{', '.join(sorted(live))} still uses them", level=1, stage=Stage.DOWN)
    return kept


def _delete_iam(rt: Runtime, kind: str, name: str,
                delete: Callable[[Any, str], None]) -> None:
    """A leftover of a stack whose delete failed. The user's policy has no IAM write
    (`clusterkit iam-policy`): the service role deletes the stack's roles, so a refusal
    here is said and left, not a failure of the whole `down`."""
    try:
        delete(rt.session, name)
    except CredentialsError as err:
        rt.warn(f"left {kind} {name} ({err.message}): clusterkit's user policy has no IAM "
                "write; an administrator deletes it (`aws iam`), or the service role with "
                "the stack", level=1, stage=Stage.DOWN)
        return
    _deleted(rt, kind, name)


def down_region(rt: Runtime, cluster: str, region: str, *, timeout: float,
                delete_efs: bool = False) -> None:
    deadline = rt.clock() + timeout
    _instances(rt, cluster, region, deadline)
    _volumes(rt, cluster, region, deadline)
    _mount_targets(rt, cluster, region, deadline)
    status = stackops.delete(rt, region, stack_name(cluster), timeout=timeout)
    if status is not None:
        _deleted(rt, "stack", f"{stack_name(cluster)} ({status})")
    _sweep(rt, cluster, region, deadline, delete_efs)
    if status is not None and status != "DELETE_COMPLETE":  # retry once the sweep freed it
        stackops.delete(rt, region, stack_name(cluster), timeout=timeout)


def _show(rt: Runtime, found: dict[str, dict[str, list[str]]]) -> None:
    for region, inv in found.items():
        for kind, ids in inv.items():
            rt.info(f"{region}: {kind}: {', '.join(ids)}")


def _confirm(cluster: str, delete_efs: bool, *, yes: bool,
             confirm: Callable[[str], bool] | None) -> None:
    """Declining (or no answer: Ctrl-C) is exit 1 with nothing deleted; no terminal to
    ask on (``confirm`` None) without ``yes`` is exit 2, as for `up`."""
    extra = ", the kept EFS file systems (their data is lost) too" if delete_efs else ""
    if yes:
        return
    if confirm is None:
        raise UsageError(f"`down` would delete cluster {cluster} and there is no terminal to "
                         "ask on: nothing deleted", "pass --yes to delete without asking")
    if confirm(f"delete cluster {cluster} and all of the above{extra}?"):
        return
    raise ClusterkitError(f"not confirmed: nothing deleted of cluster {cluster}",
                          "answer yes, or pass --yes to skip the question")


def _forget(rt: Runtime, cluster: str, searched: Sequence[str], iam_kept: bool) -> bool:
    """Drop the local state (record, host keys) unless the cluster may live on elsewhere:
    its record names regions this `down` did not search (``--region`` narrowed it), or
    its IAM role is kept for a stack in another region. True when dropped."""
    rec = record.read(cluster)
    unsearched = [r for r in (rec.search if rec else ()) if r not in searched]
    if unsearched or iam_kept:
        where = f" in {', '.join(unsearched)}" if unsearched else " in another region"
        rt.info(f"kept the local record of cluster {cluster}: it may still have resources"
                f"{where} (`clusterkit down {cluster}` without --region searches them)")
        return False
    known_hosts.forget(cluster)
    return True


def _left(rt: Runtime, cluster: str, regions: Sequence[str],
          delete_efs: bool) -> dict[str, dict[str, list[str]]]:
    """What is still there after the teardown (kept EFS aside unless deleted)."""
    after = per_region(regions, lambda r: _to_delete(inventory(rt, cluster, r), delete_efs))
    return {r: inv for r, inv in after.items() if inv}


def down(rt: Runtime, cluster: str, regions: Sequence[str], **options: Any) -> DownResult:
    """`down` of ``cluster``, one `up` or `down` at a time per cluster on this machine."""
    with cluster_lock(cluster, "down"):
        return _down(rt, cluster, regions, **options)


def _down(rt: Runtime, cluster: str, regions: Sequence[str], *, yes: bool,
          confirm: Callable[[str], bool] | None = None, timeout: float = 1800.0,
          delete_efs: bool = False) -> DownResult:
    """Delete the cluster in every region of ``regions`` (every enabled region when
    empty, searched in parallel) where it has anything."""
    searched = search_regions(rt, regions)
    scan = per_region(searched, lambda r: inventory(rt, cluster, r))
    found = {r: _to_delete(inv, delete_efs) for r, inv in scan.items()}
    found = {r: inv for r, inv in found.items() if inv}
    kept = kept_efs.kept(rt, cluster, [r for r, inv in scan.items() if KEPT in inv])
    result = DownResult(cluster, searched, found, [] if delete_efs else kept)
    if not found:
        iam_names = _iam_names(rt, cluster)
        known = record.read(cluster) is not None or bool(kept) or any(iam_names)
        where = ", ".join(searched) if len(searched) <= 3 else f"{len(searched)} regions"
        if not known:  # a typo must not look like success
            raise ClusterkitError(f"no cluster named {cluster} in {where}",
                                  "check the name: `clusterkit status` lists your clusters "
                                  "(and `--region` narrows the search)")
        iam_kept = _iam(rt, cluster, iam_names)
        rt.done(Stage.DOWN, f"cluster {cluster}: nothing to delete in {where}")
        _report_kept(rt, cluster, result.kept_efs)
        _forget(rt, cluster, searched, bool(iam_kept))
        return result
    _show(rt, found)
    _report_kept(rt, cluster, [] if delete_efs else kept)
    _confirm(cluster, delete_efs, yes=yes, confirm=confirm)
    for region in found:
        rt.started(Stage.DOWN, f"deleting cluster {cluster} in {region}")
        down_region(rt, cluster, region, timeout=timeout, delete_efs=delete_efs)
    iam_kept = _iam(rt, cluster)
    left = _left(rt, cluster, list(found), delete_efs)
    if left:
        raise AwsError(f"cluster {cluster} is not gone: still there: " + "; ".join(
            f"{r}: {k} {', '.join(ids)}" for r, inv in left.items() for k, ids in inv.items()),
            f"run `clusterkit down {cluster}` again")
    kept = f" (kept: {len(result.kept_efs)} EFS file system(s))" if result.kept_efs else ""
    if _forget(rt, cluster, searched, bool(iam_kept)):
        rt.done(Stage.DOWN, f"cluster {cluster} is gone{kept}")
    else:
        rt.done(Stage.DOWN, f"cluster {cluster} is deleted in {', '.join(found)}{kept}")
    return result


def _report_kept(rt: Runtime, cluster: str, kept: Sequence[dict[str, Any]]) -> None:
    for fs in kept:
        rt.info(f"kept EFS file system {kept_efs.describe(fs)} ({kept_efs.PRICE_NOTE}); "
                f"`clusterkit down {cluster} --delete-efs` deletes it")


def do_down(target: str, *, yes: bool, region: str | None = None, profile: str | None = None,
            rt: Runtime | None = None, confirm: Callable[[str], bool] | None = None,
            timeout: float = 1800.0, delete_efs: bool = False) -> DownResult:
    """``region``: an explicit --region, narrowing the search to it. Without it the
    local record says where the cluster is, else every enabled region is searched."""
    rt = rt or Runtime.make(region=region, profile=profile)
    cluster, regions, _ = resolve_target(target, region)
    assert cluster is not None
    return down(rt, cluster, regions, yes=yes, confirm=confirm, timeout=timeout,
                delete_efs=delete_efs)
