"""EFS file systems a cluster keeps (``storage.efs.deletion_policy: retain``): found by
tag, priced, reused by the next `up` of the same cluster name, listed by `status` and
`down`, deleted by `down --delete-efs`.

Priced at EFS Standard's us-east-1 list price ($0.30 per GB-month, storage only;
other regions differ a little): ``EFS_GB_MONTH`` of plan.spend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterkit.aws import teardown
from clusterkit.cluster.runtime import Runtime
from clusterkit.cluster.target import per_region
from clusterkit.plan.spend import EFS_GB_MONTH
from clusterkit.spec.model import Spec

GB = 1e9
PRICE_NOTE = f"EFS Standard ${EFS_GB_MONTH:.2f}/GB-month (us-east-1 list price, storage only)"


def priced(fs: Mapping[str, Any]) -> dict[str, Any]:
    """A kept file system as status / down show it: id, region, size, $/month."""
    size_gb = fs.get("size_bytes", 0) / GB
    return {"id": fs["id"], "region": fs.get("region"), "created": fs.get("created", ""),
            "size_gb": round(size_gb, 3), "usd_per_month": round(size_gb * EFS_GB_MONTH, 2)}


def describe(kept: Mapping[str, Any]) -> str:
    return (f"{kept['id']} in {kept['region']}: {kept['size_gb']:.3f} GB, "
            f"${kept['usd_per_month']:.2f}/month")


def kept(rt: Runtime, cluster: str, regions: Sequence[str]) -> list[dict[str, Any]]:
    """The cluster's kept file systems in ``regions`` (searched in parallel), priced."""
    found = per_region(regions, lambda r: teardown.file_systems(rt.session, r, cluster))
    return [priced(fs) for fss in found.values() for fs in fss if fs["retain"]]


def reuse_id(rt: Runtime, spec: Spec, region: str,
             current: Mapping[str, str] | None) -> str:
    """The kept file system the cluster's stack should mount instead of creating one
    ("" for none): only with ``deletion_policy: retain`` and no ``file_system_id``, and
    never replacing the file system a live stack already made or mounts. The newest kept
    one when there are several."""
    efs = spec.storage.efs
    if efs is None or not efs.create or efs.deletion_policy != "retain":
        return ""
    if current and current.get("CreateEfs") == "true":
        return ""  # the stack's own file system
    if current and current.get("ExistingFileSystemId"):
        return current["ExistingFileSystemId"]
    found = [fs for fs in teardown.file_systems(rt.session, region, spec.name) if fs["retain"]]
    if not found:
        return ""
    return str(max(found, key=lambda fs: (fs["created"], fs["id"]))["id"])
