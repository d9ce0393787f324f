"""Which regions new nodes may go to: the spec's (or --region's), known to botocore,
and holding every resource the spec pins (plan.pinning)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.aws.endpoints import check_regions
from clusterkit.aws.pinned import locate
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.plan.pinning import PinReport, allowed_regions, pinned_resources
from clusterkit.spec.model import Spec


def checked_regions(spec: Spec, region: str | None) -> list[str]:
    """The regions to use, checked before any AWS call: every region the spec names is
    one botocore knows, and --region (``region``) is one of them (then only it)."""
    check_regions(spec.regions or (spec.region,), where=spec.file)
    if region is not None:
        check_regions([region], where="--region")
    return allowed_regions(spec, region)


def pin_report(rt: Runtime, spec: Spec, regions: Sequence[str]) -> PinReport:
    """Every pinned resource looked up in each of ``regions`` (one read call each).
    UsageError (exit 2) when no region holds all of them."""
    pins = pinned_resources(spec)
    report = PinReport(tuple(regions), locate(rt.session, pins, regions) if pins else {})
    if pins and not report.qualifying:
        raise report.failure()
    return report


def launch_regions(rt: Runtime, spec: Spec, region: str | None = None) -> PinReport:
    """Where new nodes may go: the checked regions that hold every pinned resource."""
    return pin_report(rt, spec, checked_regions(spec, region))


def same_region(spec: Spec, found: str | None, region: str | None) -> None:
    """A cluster that already runs elsewhere than --region: refuse (exit 2), never launch
    a second copy next to it."""
    if found and region and found != region:
        raise UsageError(f"cluster {spec.name} runs in {found}, not in --region {region}",
                         f"drop --region (or pass --region {found}); to move it, "
                         f"`clusterkit down {spec.name}` first")
