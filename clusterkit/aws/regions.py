"""Which regions the account can use (EC2 DescribeRegions), for the tag search that finds
a cluster when no local record says where it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call

if TYPE_CHECKING:
    import boto3

FALLBACK_REGION = "us-east-1"  # where to ask when the session has no region


def enabled_regions(session: boto3.Session) -> list[str]:
    """The regions enabled for the account (opted-in or not requiring opt-in), sorted."""
    ec2: Any = client(session, "ec2", session.region_name or FALLBACK_REGION)
    with aws_call("DescribeRegions", "enabled regions"):
        found = ec2.describe_regions(AllRegions=False)["Regions"]
    return sorted(r["RegionName"] for r in found
                  if r.get("OptInStatus", "opt-in-not-required") != "not-opted-in")
