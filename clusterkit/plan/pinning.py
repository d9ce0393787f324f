"""Region pinning: resources a spec names by id live in one region. PURE.

A dataset snapshot (``storage.dataset.snapshot``), a key pair (``ssh.key_name``), an AMI
(``nodes.image.id``) and an EFS file system (``storage.efs.file_system_id``) exist in one
region each. New nodes may go only to a region where every one of them exists (and a
snapshot is ``completed``, an AMI and a file system ``available``). The look-ups are
made by aws.pinned; this module says what is pinned and what the answers mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from clusterkit.errors import UsageError
from clusterkit.spec.model import Spec

FOUND = ""  # a region's verdict for a resource that exists there and is usable
MISSING = "missing"


class PinKind(str, Enum):
    SNAPSHOT = "snapshot"
    KEY_PAIR = "key pair"
    IMAGE = "AMI"
    FILE_SYSTEM = "EFS file system"


@dataclass(frozen=True)
class Pinned:
    kind: PinKind
    id: str
    path: str  # the spec key naming it

    def describe(self) -> str:
        return f"{self.kind.value} {self.id} ({self.path})"


def pinned_resources(spec: Spec) -> list[Pinned]:
    """Every resource the spec names that lives in one region, in spec order."""
    out = []
    if spec.nodes.image.id:
        out.append(Pinned(PinKind.IMAGE, spec.nodes.image.id, "nodes.image.id"))
    if spec.ssh.key_name:
        out.append(Pinned(PinKind.KEY_PAIR, spec.ssh.key_name, "ssh.key_name"))
    efs = spec.storage.efs
    if efs is not None and efs.file_system_id:
        out.append(Pinned(PinKind.FILE_SYSTEM, efs.file_system_id,
                          "storage.efs.file_system_id"))
    ds = spec.storage.dataset
    if ds is not None and ds.snapshot:
        out.append(Pinned(PinKind.SNAPSHOT, ds.snapshot, "storage.dataset.snapshot"))
    return out


def allowed_regions(spec: Spec, region: str | None) -> list[str]:
    """The spec's regions, or only ``region`` (--region) when it is one of them;
    a --region outside them is a usage error naming both (never silently ignored)."""
    regions = list(dict.fromkeys(spec.regions or (spec.region,)))
    if region is None:
        return regions
    if region not in regions:
        raise UsageError(f"--region {region} is not among the regions of {spec.file}: "
                         f"{', '.join(regions)}",
                         f"add {region} to `regions:` in the spec, or drop --region "
                         "(AWS_REGION and AWS_DEFAULT_REGION never narrow a spec's regions)")
    return [region]


@dataclass(frozen=True)
class PinReport:
    """Where each pinned resource was looked for and what was found: ``located`` maps a
    resource to {region: FOUND, MISSING or why it is unusable}."""

    regions: tuple[str, ...]
    located: Mapping[Pinned, Mapping[str, str]] = field(default_factory=dict)

    @property
    def qualifying(self) -> list[str]:
        """Regions (in spec order) where every pinned resource is usable."""
        return [r for r in self.regions
                if all(found.get(r, MISSING) == FOUND for found in self.located.values())]

    def line(self, pin: Pinned) -> str:
        found = self.located.get(pin, {})
        ok = [r for r in self.regions if found.get(r, MISSING) == FOUND]
        gone = [r for r in self.regions if found.get(r, MISSING) == MISSING]
        bad = [f"{found[r]} in {r}" for r in self.regions
               if found.get(r, MISSING) not in (FOUND, MISSING)]
        parts = ([f"found in {', '.join(ok)}"] if ok else []) + \
            ([f"missing in {', '.join(gone)}"] if gone else []) + bad
        return f"{pin.describe()}: {'; '.join(parts)}"

    def lines(self) -> list[str]:
        return [self.line(pin) for pin in self.located]

    def failure(self) -> UsageError:
        """The error when no region qualifies: each resource and where it was looked for."""
        return UsageError(
            "no region holds every resource the spec pins (looked in "
            f"{', '.join(self.regions)}):\n" + "\n".join(f"  {ln}" for ln in self.lines()),
            "use resources of one region (copy a snapshot or AMI with `aws ec2 "
            "copy-snapshot` / `copy-image`), or add the region holding them to `regions:`")


def offline_lines(pins: Sequence[Pinned]) -> list[str]:
    return [f"{pin.describe()}: lives in one region; not checked offline (plan without "
            "--offline looks it up)" for pin in pins]
