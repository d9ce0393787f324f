"""Saved plans (`clusterkit plan SPEC --out plan.json`, `clusterkit up --plan plan.json`),
after Terraform's: the file keeps the observation the plan was made from, the spec
file's SHA-256 and the plan as shown. `up --plan` refuses a spec file changed since
(exit 2), observes again and refuses any difference (exit 1, each named), else applies
the plan made from the saved observation: the plan the user read is the plan applied."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterkit.cluster.provision.observe import drift_error
from clusterkit.errors import UsageError
from clusterkit.plan.observed import Observed, differences
from clusterkit.plan.up import UpPlan, plan_lines, plan_up
from clusterkit.spec.model import Spec

FORMAT = "clusterkit-plan"
VERSION = 1


def file_sha256(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class SavedPlan:
    """A plan file as read back."""

    path: str
    spec_file: str
    spec_sha256: str
    region: str | None  # --region the plan was made with
    observed: Observed
    plan: dict[str, Any]  # UpPlan.to_json() as saved, for people and for the ceiling

    def check_spec(self) -> None:
        """UsageError (exit 2) when the spec file is gone or changed since the plan."""
        if not os.path.isfile(self.spec_file):
            raise UsageError(f"{self.path}: its spec file {self.spec_file} is gone",
                             "make the plan again: `clusterkit plan SPEC --out FILE`")
        if file_sha256(self.spec_file) != self.spec_sha256:
            raise UsageError(f"{self.spec_file} changed since {self.path} was made from it",
                             f"make the plan again: `clusterkit plan {self.spec_file} --out "
                             f"{self.path}`, read it, then `clusterkit up --plan {self.path}`")

    def checked(self, spec: Spec, now: Observed) -> Observed:
        """The saved observation when ``now`` matches it; PlanDriftError otherwise. The
        candidates and the $/h ceiling are the saved plan's, planned again from the saved
        observation by the same pure function (``spec``: the unchanged spec file's)."""
        choice = self.plan.get("choice") or {}
        ceiling = choice.get("worst_price") or choice.get("price")
        candidates = plan_up(spec, self.observed).candidates
        changed = differences(self.observed, now, candidates, ceiling)
        if changed:
            raise drift_error(spec, changed, f"make the plan again (`clusterkit plan "
                                             f"{self.spec_file} --out {self.path}`)")
        return self.observed


def save(path: str, spec_file: str, region: str | None, observed: Observed,
         plan: UpPlan) -> None:
    """Write the plan file (atomically: a reader never sees half of it)."""
    data = {"format": FORMAT, "version": VERSION, "spec_file": os.path.abspath(spec_file),
            "spec_sha256": file_sha256(spec_file), "region": region,
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
                         "make one: `clusterkit plan SPEC --out FILE`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not a plan file: {exc}",
                         "make one: `clusterkit plan SPEC --out FILE`") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{path} is not a clusterkit plan file (no \"format\": \"{FORMAT}\")",
                         "make one: `clusterkit plan SPEC --out FILE`")
    if data.get("version") != VERSION:
        raise UsageError(f"{path}: plan format version {data.get('version')!r}, this "
                         f"clusterkit reads {VERSION}", "make the plan again with this version")
    try:
        observed = Observed.from_json(data["observed"])
        return SavedPlan(path, data["spec_file"], data["spec_sha256"], data.get("region"),
                         observed, data["plan"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: a damaged plan file ({exc!r})",
                         "make the plan again: `clusterkit plan SPEC --out FILE`") from None
