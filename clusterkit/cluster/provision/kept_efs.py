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
from clusterkit.cluster.access.target import per_region
from clusterkit.cluster.runtime import Runtime
from clusterkit.plan.down import PRICE_NOTE, KeptEfs, describe_priced  # noqa: F401
from clusterkit.spec.model import Spec


def _kept(fs: Mapping[str, Any]) -> KeptEfs:
    return KeptEfs(fs["id"], fs.get("region") or "", fs.get("size_bytes", 0),
                   fs.get("created", ""))


def priced(fs: Mapping[str, Any]) -> dict[str, Any]:
    """A kept file system as status / down show it: id, region, size, $/month."""
    return _kept(fs).priced()


describe = describe_priced  # status and down show a priced one with it


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
