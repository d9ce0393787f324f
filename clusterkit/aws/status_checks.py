"""EC2 status checks (DescribeInstanceStatus): each instance's worse of its system check
(the host) and its instance check, as evidence that a node is lost (``plan.evidence``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call

if TYPE_CHECKING:
    import boto3

# The worse of two checks first: impaired beats every other value.
ORDER = ("impaired", "insufficient-data", "initializing", "not-applicable", "ok")


def status_checks(session: boto3.Session, region: str, ids: Sequence[str]) -> dict[str, str]:
    """Instance id -> its worse check (``ORDER``); an instance EC2 gives no status for
    (not running) is left out."""
    if not ids:
        return {}
    with aws_call("DescribeInstanceStatus", ",".join(ids),
                  expected={"InvalidInstanceID.NotFound"}) as call:
        pages = client(session, "ec2", region).get_paginator(
            "describe_instance_status").paginate(InstanceIds=list(ids))
        raw = [s for page in pages for s in page["InstanceStatuses"]]
    if call.expected_error:
        return {}
    return {s["InstanceId"]: worse_check(s) for s in raw}


def worse_check(status: Mapping[str, Any]) -> str:
    """The worse of an InstanceStatuses entry's SystemStatus and InstanceStatus (an
    unknown value ranks next to impaired: it is read as no evidence either way)."""
    found = [str((status.get(k) or {}).get("Status") or "insufficient-data")
             for k in ("SystemStatus", "InstanceStatus")]
    return min(found, key=lambda v: ORDER.index(v) if v in ORDER else 0.5)
