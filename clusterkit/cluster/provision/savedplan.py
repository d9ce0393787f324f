"""Saved plans (`clusterkit plan SPEC --out plan.json`, `clusterkit up --plan plan.json`),
after Terraform's: the file keeps the observation the plan was made from, the spec (where
it lies beside the plan, where it was made from, and what it means: ``record.spec_hash``)
and the plan as shown. `up --plan` refuses a spec that means something else since (exit
2; comments and layout do not count), observes again and refuses any difference (exit 1,
each named), else applies the plan made from the saved observation: the plan the user
read is the plan applied. A plan already applied (the cluster is as it makes it) changes
nothing and says so."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterkit.cluster.access.record import spec_hash
from clusterkit.cluster.provision.survey import drift_error
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import UpPlan, plan_up
from clusterkit.plan.world import Observed, differences
from clusterkit.spec.model import Spec

FORMAT = "clusterkit-plan"
VERSION = 2  # 2: the spec by its meaning, found beside the plan or where it was made from
MAKE_ONE = "make one: `clusterkit plan SPEC --out FILE`"


@dataclass(frozen=True)
class SavedPlan:
    """A plan file as read back. ``spec_file``: the spec's path relative to the plan
    file's directory; ``made_from``: its absolute path when the plan was made."""

    path: str
    spec_file: str
    made_from: str
    spec_hash: str
    region: str | None  # --region the plan was made with
    observed: Observed
    plan: dict[str, Any]  # UpPlan.to_json() as saved, for people and for the ceiling

    def spec_path(self) -> str:
        """Where the spec is: beside the plan as it was (the two moved together, e.g.
        another checkout), else where the plan was made from it (the plan moved alone);
        UsageError (exit 2) when it is in neither place."""
        beside = os.path.join(os.path.dirname(os.path.abspath(self.path)), self.spec_file)
        for candidate in (os.path.normpath(beside), self.made_from):
            if os.path.isfile(candidate):
                return candidate
        raise UsageError(f"{self.path}: its spec file is gone (looked for {self.spec_file} "
                         f"beside the plan, and {self.made_from})",
                         "put the spec back, or make the plan again: `clusterkit plan SPEC "
                         "--out FILE`")

    def spec(self) -> Spec:
        """The spec the plan was made from; UsageError (exit 2) when it is gone or means
        something else now (its values, not its bytes: comments and layout do not count)."""
        from clusterkit.spec import load

        found = self.spec_path()
        spec = load(found)
        if spec_hash(spec) != self.spec_hash:
            raise UsageError(f"{found} changed since {self.path} was made from it",
                             f"make the plan again: `clusterkit plan {found} --out "
                             f"{self.path}`, read it, then `clusterkit up --plan {self.path}`")
        return spec

    def applied(self, spec: Spec, now: Observed) -> bool:
        """The plan changed something, and the cluster is now as it makes it: planned
        again from ``now``, nothing is left to change (it was applied, or the same
        change was made another way)."""
        return plan_up(spec, self.observed).mutates and not plan_up(spec, now).mutates

    def checked(self, spec: Spec, now: Observed) -> Observed:
        """The saved observation when ``now`` matches it; PlanDriftError otherwise. The
        candidates and the $/h ceiling are the saved plan's, planned again from the saved
        observation by the same pure function (``spec``: the unchanged spec's)."""
        choice = self.plan.get("choice") or {}
        ceiling = choice.get("worst_price") or choice.get("price")
        candidates = plan_up(spec, self.observed).candidates
        changed = differences(self.observed, now, candidates, ceiling)
        if changed:
            raise drift_error(spec, changed, f"make the plan again (`clusterkit plan "
                                             f"{spec.file} --out {self.path}`)")
        return self.observed

    def to_apply(self, rt: Runtime, spec: Spec, now: Observed) -> Observed:
        """What `up --plan` plans from: the saved observation (``checked``), or ``now``
        when the plan was already applied (nothing to change; said once)."""
        if self.applied(spec, now):
            rt.info(f"{self.path} was already applied: the cluster is as the plan makes "
                    "it, nothing to change")
            return now
        return self.checked(spec, now)


def save(path: str, spec_file: str, spec: Spec, region: str | None, observed: Observed,
         plan: UpPlan) -> None:
    """Write the plan file (atomically: a reader never sees half of it)."""
    made_from = os.path.abspath(spec_file)
    data = {"format": FORMAT, "version": VERSION,
            "spec_file": os.path.relpath(made_from, os.path.dirname(os.path.abspath(path))),
            "made_from": made_from, "spec_hash": spec_hash(spec), "region": region,
            "observed": observed.to_json(), "plan": plan.to_json(),
            "lines": plan_lines(plan)}
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(target)


def load(path: str) -> SavedPlan:
    """The plan file at ``path``; UsageError (exit 2) naming it when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"no plan file {path}",
                         MAKE_ONE) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not a plan file: {exc}", MAKE_ONE) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{path} is not a clusterkit plan file (no \"format\": \"{FORMAT}\")",
                         MAKE_ONE)
    if data.get("version") != VERSION:
        raise UsageError(f"{path}: plan format version {data.get('version')!r}, this "
                         f"clusterkit reads {VERSION}", "make the plan again with this version")
    try:
        observed = Observed.from_json(data["observed"])
        return SavedPlan(path, data["spec_file"], data["made_from"], data["spec_hash"],
                         data.get("region"), observed, data["plan"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: a damaged plan file ({exc!r})",
                         "make the plan again: `clusterkit plan SPEC --out FILE`") from None
