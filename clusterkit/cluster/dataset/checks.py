"""The dataset parts `up`, `plan` and `deploy-dataset` share: the snapshot checked before
anything is spent (exit 2 naming it), and the cluster's clones as bootstrap's
``DatasetView``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterkit.aws import volumes
from clusterkit.aws.regions import enabled_regions
from clusterkit.cluster.access.target import per_region
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.plan import dataset as pd
from clusterkit.plan.nodes import Node
from clusterkit.spec.model import Dataset, Spec


def checked_snapshot(rt: Runtime, snapshot_id: str, region: str, size_gb: int | None,
                     ) -> tuple[pd.Snapshot, pd.SnapshotVerdict]:
    """The snapshot in ``region`` and the verdict on it; UsageError (exit 2) naming it when
    it is unknown, not completed (or an interrupted upload), in another region, or larger
    than ``size_gb``. Other regions are searched only when ``region`` has no such id."""
    found = volumes.describe_snapshot(rt.session, region, snapshot_id)
    elsewhere: list[str] = []
    if found is None:
        try:
            others = [r for r in enabled_regions(rt.session) if r != region]
        except ClusterkitError:
            others = []
        hits = per_region(others, lambda r: volumes.describe_snapshot(rt.session, r,
                                                                      snapshot_id))
        elsewhere = [r for r, snap in hits.items() if snap is not None]
    verdict = pd.check_snapshot(snapshot_id, region, found, elsewhere, size_gb)
    if not verdict.ok or found is None:
        raise UsageError(verdict.error or f"no snapshot {snapshot_id}", verdict.hint)
    return found, verdict


def dataset_view(ds: Dataset, volumes_by_index: Mapping[int, str], snap: pd.Snapshot | None,
                 *, verify: str = "size", prewarm: bool = False) -> Any:
    """bootstrap's ``DatasetView`` of the clones (``volumes_by_index``: node index ->
    volume id)."""
    from clusterkit.bootstrap.steps import DatasetView  # type: ignore[attr-defined]

    return DatasetView(mount=ds.mount, volumes=dict(volumes_by_index),
                       manifest_sha256=snap.manifest_sha256 if snap else None,
                       verify=verify, prewarm=prewarm)


def view_for_up(rt: Runtime, spec: Spec, region: str, nodes: Sequence[Node]) -> Any:
    """The view `up`'s bootstrap mounts: the attached clones of the spec's snapshot (made
    by the launch or by deploy-dataset), or None when the spec names no snapshot."""
    ds = spec.storage.dataset
    if ds is None or not ds.snapshot:
        return None
    index_of = {n.instance_id: n.index for n in nodes if n.index is not None}
    found = {index_of[c.instance_id]: c.volume_id
             for c in volumes.dataset_clones(rt.session, region, spec.name)
             if c.snapshot_id == ds.snapshot and c.instance_id in index_of}
    if not found:
        return None
    snap = volumes.describe_snapshot(rt.session, region, ds.snapshot)
    return dataset_view(ds, found, snap)


def hydration(rt: Runtime, region: str, ids: Sequence[str]) -> dict[str, str]:
    """{volume id: "42%" | "done" | "unknown"}: AWS's initialization details where it gives
    them; "unknown" where it does not, or where the call fails (the emulator answers it
    with a server error), since `status` must not fail over a detail."""
    try:
        details = volumes.initialization(rt.session, region, ids)
    except ClusterkitError:
        details = {}
    return {vid: pd.hydration(details.get(vid)) for vid in ids}
