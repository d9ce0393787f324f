"""Elastic IPs: the master's public address where EC2 gives it none (an instance
launched with several network interfaces, as EFA types are). Each is tagged with the
cluster, reused by a later `up` (a replaced master) and released by `down`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter, tag_specs

if TYPE_CHECKING:
    import boto3

GONE = frozenset({"InvalidAllocationID.NotFound", "InvalidAddress.NotFound"})


@dataclass(frozen=True)
class Address:
    allocation_id: str
    public_ip: str
    interface: str | None  # the network interface it is associated with, if any


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def cluster_addresses(session: boto3.Session, region: str, cluster: str) -> list[Address]:
    """The cluster's Elastic IPs (by its tag), allocation id order."""
    with aws_call("DescribeAddresses", cluster):
        raw = _ec2(session, region).describe_addresses(Filters=cluster_filter(cluster))
    found = [Address(a["AllocationId"], a.get("PublicIp", ""), a.get("NetworkInterfaceId"))
             for a in raw.get("Addresses", [])]
    return sorted(found, key=lambda a: a.allocation_id)


def allocation_ids(session: boto3.Session, region: str, cluster: str) -> list[str]:
    """What `down` releases."""
    return [a.allocation_id for a in cluster_addresses(session, region, cluster)]


def attach_public_address(session: boto3.Session, region: str, cluster: str,
                          interface: str, tags: Mapping[str, str]) -> Address:
    """An Elastic IP on ``interface``: the cluster's that is free (or already there),
    else a new one tagged ``tags``."""
    owned = cluster_addresses(session, region, cluster)
    address = next((a for a in owned if a.interface == interface), None) or \
        next((a for a in owned if a.interface is None), None)
    if address is None:
        with aws_call("AllocateAddress", f"an Elastic IP for {cluster}"):
            made = _ec2(session, region).allocate_address(
                Domain="vpc", TagSpecifications=tag_specs(["elastic-ip"], tags))
        address = Address(made["AllocationId"], made.get("PublicIp", ""), None)
    if address.interface != interface:
        with aws_call("AssociateAddress", f"{address.public_ip} to {interface}"):
            _ec2(session, region).associate_address(AllocationId=address.allocation_id,
                                                    NetworkInterfaceId=interface)
    return Address(address.allocation_id, address.public_ip, interface)


def release_address(session: boto3.Session, region: str, allocation_id: str) -> None:
    """Released (an association left by a running instance is undone first)."""
    ec2 = _ec2(session, region)
    with aws_call("DescribeAddresses", allocation_id, expected=GONE):
        raw = ec2.describe_addresses(AllocationIds=[allocation_id]).get("Addresses", [])
        for association in [a["AssociationId"] for a in raw if a.get("AssociationId")]:
            ec2.disassociate_address(AssociationId=association)
    with aws_call("ReleaseAddress", allocation_id, expected=GONE):
        ec2.release_address(AllocationId=allocation_id)
