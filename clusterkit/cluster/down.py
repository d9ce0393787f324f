"""`clusterkit down`: delete everything a cluster owns, found by tag, in order:
spot requests and fleets, instances (waited), volumes, the stack (waited), then a sweep
of every tagged resource still there. Safe to run twice and after a crashed `up`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from clusterkit.aws import instances, keypairs, teardown, volumes
from clusterkit.cluster import stackops
from clusterkit.cluster.common import Runtime, resolve_target
from clusterkit.errors import AwsError, UsageError
from clusterkit.plan.stack import stack_name
from clusterkit.remote import known_hosts

SG_BUSY = ("DependencyViolation", "InvalidGroup.InUse")


def inventory(rt: Runtime, cluster: str, region: str) -> dict[str, list[str]]:
    """What `down` would delete in ``region`` (IAM is global, listed under every region)."""
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
        "EFS kept (retain)": [f["id"] for f in fss if f["retain"]],
        "key pairs": keypairs.cluster_key_pairs(s, region, cluster),
        "IAM roles": teardown.iam_roles(s, cluster),
        "instance profiles": teardown.instance_profiles(s, cluster),
    }
    return {k: v for k, v in inv.items() if v}


def _stack(rt: Runtime, region: str, cluster: str) -> dict[str, Any] | None:
    from clusterkit.aws import stack as cfn

    return cfn.describe_stack(rt.session, region, stack_name(cluster))


def _deleted(rt: Runtime, kind: str, ident: str) -> None:
    rt.say(f"  [red]deleted[/red] {kind} {ident}")


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
    todo = [n.instance_id for n in live if n.state not in ("shutting-down",)]
    if todo:
        instances.terminate_instances(s, region, todo)
    for iid in ids:
        rt.say(f"  [red]terminating[/red] instance {iid}")
    while ids:
        left = [n for n in instances.describe_nodes(s, region, ids) if n.state != "terminated"]
        if not left:
            break
        if rt.clock() >= deadline:
            raise AwsError(f"instances not terminated in time: "
                           f"{', '.join(n.instance_id for n in left)}",
                           "run `clusterkit down` again")
        rt.sleep(rt.poll)
    for iid in ids:
        _deleted(rt, "instance", iid)


def _volumes(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    for vol in volumes.cluster_volumes(rt.session, region, cluster):
        if vol["attached_to"]:
            volumes.detach_volume(rt.session, region, vol["id"])
        _retry(rt, deadline, lambda v=vol["id"]: volumes.delete_volume(rt.session, region, v),
               ("VolumeInUse", "IncorrectState"))
        _deleted(rt, "volume", vol["id"])


def _retry(rt: Runtime, deadline: float, call: Callable[[], Any], busy: Sequence[str]) -> Any:
    """Call until it stops failing with a 'still in use' code, or the deadline."""
    while True:
        try:
            return call()
        except AwsError as exc:
            if exc.code not in busy or rt.clock() >= deadline:
                raise
        rt.sleep(rt.poll)


def _mount_targets(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    """Mount targets first: clusterkit made them, and the file system (and the security
    group they use) cannot be deleted while they exist."""
    s = rt.session
    for fs in teardown.file_systems(s, region, cluster):
        targets = teardown.mount_targets(s, region, fs["id"])
        for mt in targets:
            teardown.delete_mount_target(s, region, mt)
            _deleted(rt, "EFS mount target", mt)
        while targets and teardown.mount_targets(s, region, fs["id"]):
            if rt.clock() >= deadline:
                raise AwsError(f"EFS mount targets of {fs['id']} not deleted in time",
                               "run `clusterkit down` again")
            rt.sleep(rt.poll)


def _efs(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    s = rt.session
    _mount_targets(rt, cluster, region, deadline)
    for fs in teardown.file_systems(s, region, cluster):
        if fs["retain"]:
            rt.say(f"  [yellow]kept[/yellow] EFS {fs['id']} (storage.efs.deletion_policy: "
                   "retain); delete it with `aws efs delete-file-system`")
            continue
        _retry(rt, deadline, lambda f=fs["id"]: teardown.delete_file_system(s, region, f),
               ("FileSystemInUse",))
        _deleted(rt, "EFS file system", fs["id"])


def _sweep(rt: Runtime, cluster: str, region: str, deadline: float) -> None:
    s = rt.session
    _efs(rt, cluster, region, deadline)
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


def _iam(rt: Runtime, cluster: str) -> None:
    for prof in teardown.instance_profiles(rt.session, cluster):
        teardown.delete_instance_profile(rt.session, prof)
        _deleted(rt, "instance profile", prof)
    for role in teardown.iam_roles(rt.session, cluster):
        teardown.delete_role(rt.session, role)
        _deleted(rt, "IAM role", role)


def down_region(rt: Runtime, cluster: str, region: str, *, timeout: float) -> None:
    deadline = rt.clock() + timeout
    _instances(rt, cluster, region, deadline)
    _volumes(rt, cluster, region, deadline)
    _mount_targets(rt, cluster, region, deadline)
    status = stackops.delete(rt, region, stack_name(cluster), timeout=timeout)
    if status is not None:
        _deleted(rt, "stack", f"{stack_name(cluster)} ({status})")
    _sweep(rt, cluster, region, deadline)
    if status is not None and status != "DELETE_COMPLETE":  # retry once the sweep freed it
        stackops.delete(rt, region, stack_name(cluster), timeout=timeout)


def down(rt: Runtime, cluster: str, regions: Sequence[str], *, yes: bool,
         confirm: Callable[[str], bool] | None = None, timeout: float = 1800.0) -> dict:
    found = {r: inventory(rt, cluster, r) for r in regions}
    if not any(found.values()):
        known_hosts.forget(cluster)
        rt.say(f"cluster {cluster}: nothing to delete in {', '.join(regions)}")
        return {"cluster": cluster, "deleted": {}}
    for region, inv in found.items():
        for kind, ids in inv.items():
            rt.say(f"{region}: {kind}: {', '.join(ids)}")
    if not yes and not (confirm and confirm(f"delete cluster {cluster} and all of the above?")):
        raise UsageError("not confirmed: nothing deleted", "pass --yes to skip the question")
    for region in regions:
        if found[region]:
            rt.say(f"deleting cluster {cluster} in {region}")
            down_region(rt, cluster, region, timeout=timeout)
    _iam(rt, cluster)
    known_hosts.forget(cluster)
    rt.say(f"[green]cluster {cluster} is gone[/green]")
    return {"cluster": cluster, "deleted": found}


def do_down(target: str, *, yes: bool, region: str | None = None, profile: str | None = None,
            rt: Runtime | None = None, confirm: Callable[[str], bool] | None = None,
            timeout: float = 1800.0) -> dict:
    rt = rt or Runtime.make(region=region, profile=profile)
    cluster, regions, _ = resolve_target(target, region or rt.session.region_name)
    return down(rt, cluster, regions, yes=yes, confirm=confirm, timeout=timeout)
