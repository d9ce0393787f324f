"""`down`'s saved plan (`clusterkit down NAME --out down.json`, then `clusterkit down
--plan down.json`): the typed ``DownPlan`` with the clusterkit version that wrote it
(``planfile``: another version's is refused, exit 2). `down --plan` reads the cluster
again only to refuse any difference from what the plan deletes (exit 1, each named),
then deletes exactly the saved plan's resources, without asking again."""

from __future__ import annotations

from clusterkit.cluster.provision import planfile
from clusterkit.errors import PlanDriftError, UsageError
from clusterkit.plan.down import DownPlan
from clusterkit.plan.wire import WireError, from_plain, to_plain

FORMAT = "clusterkit-down-plan"
VERSION = 1
MAKE_ONE = "make one: `clusterkit down NAME --out FILE`"


def save(path: str, plan: DownPlan) -> None:
    planfile.write(path, FORMAT, VERSION, {"cluster": plan.cluster, "plan": to_plain(plan),
                                           "lines": plan.lines()})


def load(path: str) -> DownPlan:
    """The saved plan; UsageError (exit 2) naming the file when it is not one."""
    data = planfile.read(path, FORMAT, VERSION, MAKE_ONE)
    try:
        return from_plain(DownPlan, data["plan"])
    except (KeyError, WireError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: a damaged plan file ({exc})", MAKE_ONE) from None


def _resources(plan: DownPlan) -> set[tuple[str, str, str]]:
    """(region, kind, id) of everything the plan deletes, and the kept file systems."""
    out = {(r.region, str(d.kind), i) for r in plan.regions for d in r.deletions
           for i in d.ids}
    return out | {(fs.region, "kept EFS", fs.id) for fs in plan.kept_efs}


def check(path: str, saved: DownPlan, now: DownPlan) -> None:
    """PlanDriftError (exit 1, nothing deleted) naming what appeared or went since the
    plan was saved."""
    before, after = _resources(saved), _resources(now)
    changed = [f"{region}: {kind} {rid} is new" for region, kind, rid in sorted(after - before)]
    changed += [f"{region}: {kind} {rid} is gone" for region, kind, rid in sorted(before - after)]
    if changed:
        raise PlanDriftError(
            f"cluster {saved.cluster} changed since {path} was made, so nothing was "
            "deleted:\n" + "\n".join(f"  {line}" for line in changed),
            f"make the plan again: `clusterkit down {saved.cluster} --out {path}`")
