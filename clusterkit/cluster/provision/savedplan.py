"""Saved plans (`clusterkit plan SPEC --out plan.json`, `clusterkit up --plan plan.json`),
after Terraform's: the file keeps the typed plan itself (``UpPlan.to_wire``), the
observation it was made from, the clusterkit version that wrote it, and the spec (where
it lies beside the plan, where it was made from, and what it means: ``record.spec_hash``,
the digest of its values). A plan another clusterkit version wrote is refused (exit 2,
naming both versions); so is a spec that means something else since (comments and
layout do not count). `up --plan` observes again, only to refuse any difference (exit 1,
each named), and then applies the saved plan as read back, without planning again: the
plan the user read is the plan applied. A plan already applied (the cluster is as it
makes it) changes nothing and says so."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from clusterkit.cluster.access.record import spec_hash
from clusterkit.cluster.provision import planfile
from clusterkit.cluster.provision.survey import drift_error
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import UpPlan, plan_up
from clusterkit.plan.wire import WireError
from clusterkit.plan.world import Observed, differences
from clusterkit.spec.model import Spec

FORMAT = "clusterkit-plan"
# 2: the spec by its meaning, found beside the plan or where it was made from; 3: the
# typed plan itself, and the clusterkit version that wrote it
VERSION = 3
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
    wire: dict[str, Any]  # UpPlan.to_wire() as saved: ``plan()`` reads it back

    def plan(self, spec: Spec) -> UpPlan:
        """The saved plan, typed (UsageError, exit 2, when it does not read back)."""
        try:
            return UpPlan.from_wire(self.wire, spec)
        except (WireError, TypeError, ValueError) as exc:
            raise UsageError(f"{self.path}: a damaged plan file ({exc})", MAKE_ONE) from None

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

    def applied(self, plan: UpPlan, spec: Spec, now: Observed) -> bool:
        """The plan changes something, and the cluster is now as it makes it: planned
        from ``now`` (to tell, never to apply), nothing is left to change."""
        return plan.mutates and not plan_up(spec, now).mutates

    def checked(self, plan: UpPlan, spec: Spec, now: Observed) -> None:
        """PlanDriftError unless ``now`` matches the saved observation (the candidates
        and the $/h ceiling are the saved plan's)."""
        choice = plan.choice
        ceiling = (choice.worst_price or choice.price) if choice else None
        changed = differences(self.observed, now, plan.candidates, ceiling)
        if changed:
            raise drift_error(spec, changed,
                              f"make the plan again (`clusterkit plan "
                              f"{self.spec_path()} --out {self.path}`)")

    def to_apply(self, rt: Runtime, spec: Spec, now: Observed) -> tuple[Observed, UpPlan]:
        """What `up --plan` applies, and the observation it was made from: the saved
        plan as read back (``checked`` first), or, when it was already applied, the
        empty plan of ``now`` (nothing to change; said once)."""
        plan = self.plan(spec)
        if self.applied(plan, spec, now):
            rt.info(f"{self.path} was already applied: the cluster is as the plan makes "
                    "it, nothing to change")
            return now, plan_up(spec, now)
        self.checked(plan, spec, now)
        return self.observed, plan


def save(path: str, spec_file: str, spec: Spec, region: str | None, observed: Observed,
         plan: UpPlan) -> None:
    """Write the plan file (atomically: a reader never sees half of it)."""
    made_from = os.path.abspath(spec_file)
    planfile.write(path, FORMAT, VERSION, {
        "spec_file": os.path.relpath(made_from, os.path.dirname(os.path.abspath(path))),
        "made_from": made_from, "spec_hash": spec_hash(spec), "region": region,
        "observed": observed.to_json(), "plan": plan.to_wire(), "lines": plan_lines(plan)})


def load(path: str) -> SavedPlan:
    """The plan file at ``path``; UsageError (exit 2) naming it when it is not one."""
    data = planfile.read(path, FORMAT, VERSION, MAKE_ONE)
    try:
        observed = Observed.from_json(data["observed"])
        if not isinstance(data["plan"], dict):
            raise TypeError("its plan is not an object")
        return SavedPlan(path, data["spec_file"], data["made_from"], data["spec_hash"],
                         data.get("region"), observed, data["plan"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: a damaged plan file ({exc!r})",
                         "make the plan again: `clusterkit plan SPEC --out FILE`") from None
