"""What `down` deletes, as data and as the lines it shows before it asks. PURE.

`down` reads the cluster by tag in every region it searches into one ``DownObserved``,
plans from that alone (``plan_down``), shows ``DownPlan.lines()``, asks, and deletes per
region what the plan names, in the order of ``Resource``. Planning cases are data:
tests/unit/plan_down_cases/.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from clusterkit.plan.profiles import ProfileKind
from clusterkit.plan.spend import EFS_GB_MONTH

GB = 1e9
PRICE_NOTE = f"EFS Standard ${EFS_GB_MONTH:.2f}/GB-month (us-east-1 list price, storage only)"


class Resource(StrEnum):
    """What `down` deletes in a region, in the order it deletes them; the value is the
    word `down` shows."""

    # the master that wears the recovery controller's profile: its controller is stopped
    # first, or it would replace the nodes `down` terminates
    CONTROLLER = "recovery controller to stop first, on the master"
    INSTANCES = "instances"
    VOLUMES = "volumes"
    # mount targets of a file system the cluster does not own (storage.efs.file_system_id)
    # that hold its security group: the group taken off, the target deleted only where
    # it has no other (clusterkit made it); before the stack, which deletes the group
    LENT_MOUNT_TARGETS = "EFS mount targets lent to the cluster (given back)"
    STACK = "stack"
    EFS = "EFS file systems"
    KEPT_EFS = "EFS kept (retain)"  # deleted only with --delete-efs
    LAUNCH_TEMPLATES = "launch templates"
    PLACEMENT_GROUPS = "placement groups"
    ADDRESSES = "Elastic IPs"  # the master's, on a type launched with several interfaces
    SECURITY_GROUPS = "security groups"
    KEY_PAIRS = "key pairs"


# The logical id of the controller's instance profile in the stack template: CloudFormation
# names a profile <stack>-<logical id>-<suffix>, so the profile's ARN tells it apart.
CONTROLLER_PROFILE = "ControllerInstanceProfile"  # its logical id in an older stack


def controller_hosts(profiles: Mapping[str, str | None]) -> list[str]:
    """Of ``profiles`` (running instance id -> its instance profile's ARN), the instances
    that wear the recovery controller's profile: where a controller may run (the profile
    `up` makes, ``plan.profiles``, or an older clusterkit's stack's)."""
    def controller(name: str) -> bool:
        return (f"-{CONTROLLER_PROFILE}-" in name
                or name.endswith(f"-{ProfileKind.CONTROLLER.value}"))

    return [iid for iid, arn in profiles.items() if arn and controller(arn.rsplit("/", 1)[-1])]


class Verdict(StrEnum):
    DELETE = "delete"  # something to delete: shown, confirmed, applied
    NOTHING = "nothing to delete"  # a known cluster (record, kept EFS, IAM) with no resources
    NO_SUCH_CLUSTER = "no such cluster"  # nothing anywhere: a typo must not look like success


@dataclass(frozen=True)
class KeptEfs:
    """An EFS file system the cluster keeps (``storage.efs.deletion_policy: retain``)."""

    id: str
    region: str
    size_bytes: int = 0
    created: str = ""

    def priced(self) -> dict[str, Any]:
        """As `status` and `down` report it: id, region, size, $/month (storage only)."""
        size_gb = self.size_bytes / GB
        return {"id": self.id, "region": self.region, "created": self.created,
                "size_gb": round(size_gb, 3), "usd_per_month": round(size_gb * EFS_GB_MONTH, 2)}

    def describe(self) -> str:
        return describe_priced(self.priced())


def describe_priced(p: Mapping[str, Any]) -> str:
    """One kept file system as ``KeptEfs.priced`` gives it, in words."""
    return f"{p['id']} in {p['region']}: {p['size_gb']:.3f} GB, ${p['usd_per_month']:.2f}/month"


@dataclass(frozen=True)
class RegionSeen:
    """The cluster's resources in one region, found by tag. ``found`` holds every kind
    but ``KEPT_EFS``: the kept file systems are ``kept_efs``, with their size.
    ``ending``: instances already shutting down (terminated by then, they are no change)."""

    region: str
    found: Mapping[Resource, tuple[str, ...]] = field(default_factory=dict)
    kept_efs: tuple[KeptEfs, ...] = ()
    ending: frozenset[str] = frozenset()

    @classmethod
    def of(cls, region: str, found: Mapping[Resource, Sequence[str]],
           file_systems: Sequence[Mapping[str, Any]], ending: Iterable[str] = ()) -> RegionSeen:
        """From the executors' answers; ``file_systems`` as aws.teardown.file_systems
        gives them (the retained ones are the kept EFS)."""
        found = {**found, Resource.EFS: [f["id"] for f in file_systems if not f["retain"]]}
        kept = tuple(KeptEfs(f["id"], region, f.get("size_bytes", 0), f.get("created", ""))
                     for f in file_systems if f["retain"])
        return cls(region, {k: tuple(v) for k, v in found.items() if v}, kept,
                   frozenset(ending))


@dataclass(frozen=True)
class IamNames:
    """The cluster's IAM roles and instance profiles (global, found by IAM path)."""

    roles: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.roles or self.profiles)


@dataclass(frozen=True)
class DownObserved:
    """One read of the cluster in the regions `down` searched. ``iam`` is read only when
    no region holds anything (then it says whether the cluster exists; otherwise IAM is
    cleaned up after the stacks that use it are gone): None when not read."""

    cluster: str
    searched: tuple[str, ...]
    regions: tuple[RegionSeen, ...]
    record: bool  # this machine has a local record of the cluster
    iam: IamNames | None = None

    @property
    def kept_efs(self) -> tuple[KeptEfs, ...]:
        return tuple(fs for r in self.regions for fs in r.kept_efs)


@dataclass(frozen=True)
class Deletion:
    kind: Resource
    ids: tuple[str, ...]


@dataclass(frozen=True)
class RegionPlan:
    """What `down` deletes in one region, in order. ``file_systems``: every file system
    of the cluster there, kept ones too: their mount targets go before the stack (they
    hold its security group)."""

    region: str
    deletions: tuple[Deletion, ...]
    ending: frozenset[str] = frozenset()
    file_systems: tuple[str, ...] = ()

    def ids(self, kind: Resource) -> tuple[str, ...]:
        return next((d.ids for d in self.deletions if d.kind == kind), ())


@dataclass(frozen=True)
class DownPlan:
    cluster: str
    searched: tuple[str, ...]
    regions: tuple[RegionPlan, ...]  # only those with something to delete
    kept_efs: tuple[KeptEfs, ...]  # kept, not deleted (empty with --delete-efs)
    delete_efs: bool
    verdict: Verdict
    iam: IamNames | None = None  # as observed (the clean-up of a cluster with nothing left)

    @property
    def todo(self) -> bool:
        return self.verdict is Verdict.DELETE

    def where(self) -> str:
        """The regions searched, short."""
        n = len(self.searched)
        return ", ".join(self.searched) if n <= 3 else f"{n} regions"

    def summary(self) -> str:
        """The verdict in words (for a plan with nothing to delete)."""
        if self.verdict is Verdict.NO_SUCH_CLUSTER:
            return f"no cluster named {self.cluster} in {self.where()}"
        if self.verdict is Verdict.NOTHING:
            return f"cluster {self.cluster}: nothing to delete in {self.where()}"
        return f"delete cluster {self.cluster} in {', '.join(r.region for r in self.regions)}"

    def lines(self) -> list[str]:
        """What `down` shows before it asks: each region's deletions, then the kept EFS."""
        out = [f"{r.region}: {d.kind}: {', '.join(d.ids)}"
               for r in self.regions for d in r.deletions]
        return out + [f"kept EFS file system {fs.describe()} ({PRICE_NOTE}); "
                      f"`clusterkit down {self.cluster} --delete-efs` deletes it"
                      for fs in self.kept_efs]

    def question(self) -> str:
        extra = ", the kept EFS file systems (their data is lost) too" if self.delete_efs else ""
        return f"delete cluster {self.cluster} and all of the above{extra}?"

    def deleted(self) -> dict[str, dict[str, list[str]]]:
        """Per region, kind -> ids (``DownResult.deleted``, JSON)."""
        return {r.region: {d.kind.value: list(d.ids) for d in r.deletions}
                for r in self.regions}


def _region_plan(seen: RegionSeen, delete_efs: bool) -> RegionPlan:
    found = dict(seen.found)
    found.pop(Resource.KEPT_EFS, None)
    if delete_efs:
        found[Resource.KEPT_EFS] = tuple(fs.id for fs in seen.kept_efs)
    deletions = tuple(Deletion(kind, tuple(found[kind])) for kind in Resource
                      if found.get(kind))
    file_systems = (*found.get(Resource.EFS, ()), *(fs.id for fs in seen.kept_efs))
    return RegionPlan(seen.region, deletions, seen.ending, tuple(sorted(set(file_systems))))


def plan_down(observed: DownObserved, delete_efs: bool) -> DownPlan:
    """What `down` deletes, from one observation alone."""
    regions = tuple(p for p in (_region_plan(r, delete_efs) for r in observed.regions)
                    if p.deletions)
    if regions:
        verdict = Verdict.DELETE
    elif observed.record or observed.kept_efs or observed.iam:
        verdict = Verdict.NOTHING
    else:
        verdict = Verdict.NO_SUCH_CLUSTER
    return DownPlan(observed.cluster, observed.searched, regions,
                    () if delete_efs else observed.kept_efs, delete_efs, verdict, observed.iam)


def instance_drift(plan: DownPlan, now: Mapping[str, Sequence[str]]) -> list[str]:
    """How the instances of the planned regions differ from the plan (``now``: region ->
    the live instance ids read again): one phrase per instance that appeared or vanished.
    An instance that was already shutting down and is gone is no change."""
    out: list[str] = []
    for r in plan.regions:
        planned, seen = set(r.ids(Resource.INSTANCES)), set(now.get(r.region, ()))
        out += [f"instance {i} in {r.region} appeared (not in the plan)"
                for i in sorted(seen - planned)]
        out += [f"instance {i} in {r.region} is gone" for i in sorted(planned - seen - r.ending)]
    return out


@dataclass(frozen=True)
class IamSeen:
    """The cluster's IAM role(s) with the region of the stack that made each (its
    ``clusterkit:region`` tag; None for a role made before the tag), and its instance
    profile(s) with their roles."""

    roles: Mapping[str, str | None]
    profiles: Mapping[str, tuple[str, ...]]

    def __bool__(self) -> bool:
        return bool(self.roles or self.profiles)

    def stack_regions(self) -> list[str]:
        """Where a stack that still uses them may be: the roles' regions, or every
        enabled region ([]) for an untagged role or a profile without a role."""
        if None in self.roles.values() or not all(self.profiles.values()):
            return []
        return sorted({r for r in self.roles.values() if r})


@dataclass(frozen=True)
class IamPlan:
    profiles: tuple[str, ...]  # deleted, then
    roles: tuple[str, ...]
    kept: tuple[str, ...]  # "IAM role X" / "instance profile Y": a live stack uses them


def plan_iam(seen: IamSeen, live: Collection[str]) -> IamPlan:
    """IAM goes only where no stack still uses it (``live``: the regions whose stack
    still exists): a role once its region's stack is gone, an untagged role or a profile
    without a role once no region has the stack."""
    def free(role: str) -> bool:
        region = seen.roles.get(role)
        return region not in live if region else not live

    profiles = [p for p, its in seen.profiles.items()
                if (all(free(r) for r in its) if its else not live)]
    roles = [r for r in seen.roles if free(r)]
    kept = [f"instance profile {p}" for p in seen.profiles if p not in profiles]
    kept += [f"IAM role {r}" for r in seen.roles if r not in roles]
    return IamPlan(tuple(profiles), tuple(roles), tuple(kept))
