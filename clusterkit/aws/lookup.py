"""Read-only EC2 look-ups `up` needs: default VPC, the subnet of an AZ, the AMI, AZs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.errors import AwsError
from clusterkit.plan.images import ImageCandidate
from clusterkit.spec.model import Image

if TYPE_CHECKING:
    import boto3


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def default_vpc(session: boto3.Session, region: str) -> str:
    with aws_call("DescribeVpcs", region):
        vpcs = _ec2(session, region).describe_vpcs(
            Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise AwsError(f"region {region} has no default VPC",
                       "create one with `aws ec2 create-default-vpc`")
    return vpcs[0]["VpcId"]


def default_subnet(session: boto3.Session, region: str, vpc_id: str, az: str) -> str:
    """The default subnet of ``az`` in ``vpc_id``."""
    filters = [{"Name": "vpc-id", "Values": [vpc_id]},
               {"Name": "availability-zone", "Values": [az]}]
    with aws_call("DescribeSubnets", az):
        subnets = _ec2(session, region).describe_subnets(Filters=filters)["Subnets"]
    subnets.sort(key=lambda s: (not s.get("DefaultForAz", False), s["SubnetId"]))
    if not subnets:
        raise AwsError(f"no subnet in {az} of {vpc_id}",
                       f"create a default subnet: `aws ec2 create-default-subnet "
                       f"--availability-zone {az}`")
    return subnets[0]["SubnetId"]


def subnets(session: boto3.Session, region: str, vpc_id: str) -> dict[str, str]:
    """{AZ name: subnet id} of ``vpc_id``, the AZ's default subnet where it has one."""
    with aws_call("DescribeSubnets", vpc_id):
        found = _ec2(session, region).describe_subnets(
            Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    found.sort(key=lambda s: (s["AvailabilityZone"], not s.get("DefaultForAz", False),
                              s["SubnetId"]))
    return {s["AvailabilityZone"]: s["SubnetId"] for s in reversed(found)}


def availability_zones(session: boto3.Session, region: str) -> list[dict[str, str]]:
    with aws_call("DescribeAvailabilityZones", region):
        zones = _ec2(session, region).describe_availability_zones(
            Filters=[{"Name": "state", "Values": ["available"]}])["AvailabilityZones"]
    return sorted(({"name": z["ZoneName"], "id": z.get("ZoneId", "")} for z in zones),
                  key=lambda z: z["name"])


def images(session: boto3.Session, region: str, image: Image) -> list[ImageCandidate]:
    """The AMIs ``image`` names in ``region``: by id, or every available one whose name
    matches ``image.name`` (owned by ``image.owner``). The choice is plan.images'."""
    ec2 = _ec2(session, region)
    with aws_call("DescribeImages", image.id or image.name):
        if image.id:
            found = ec2.describe_images(ImageIds=[image.id])["Images"]
        else:
            found = ec2.describe_images(
                Owners=[image.owner],
                Filters=[{"Name": "name", "Values": [image.name or "*"]},
                         {"Name": "state", "Values": ["available"]}])["Images"]
    return [ImageCandidate(i["ImageId"], i.get("Name", ""), i.get("CreationDate", ""),
                           i.get("RootDeviceName")) for i in found]
