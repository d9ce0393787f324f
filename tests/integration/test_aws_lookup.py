"""aws.lookup against the emulator over HTTP: default VPC and subnet, zones, AMIs."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.aws import lookup
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError
from clusterkit.plan.images import choose_image
from clusterkit.spec.model import Image
from tests.integration.conftest import AMI, REGION


def test_default_vpc_and_subnet(moto_env):
    s = make_session(REGION)
    vpc = lookup.default_vpc(s, REGION)
    ec2 = boto3.client("ec2", REGION)
    assert ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0]["IsDefault"]
    subnet = lookup.default_subnet(s, REGION, vpc, f"{REGION}b")
    found = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]
    assert (found["VpcId"], found["AvailabilityZone"]) == (vpc, f"{REGION}b")


def test_no_subnet_in_the_zone(moto_env):
    s = make_session(REGION)
    vpc = lookup.default_vpc(s, REGION)
    with pytest.raises(AwsError) as caught:
        lookup.default_subnet(s, REGION, vpc, f"{REGION}-nowhere-1a")
    assert caught.value.message == f"no subnet in {REGION}-nowhere-1a of {vpc}"
    assert "create-default-subnet" in (caught.value.hint or "")


def test_availability_zones(moto_env):
    zones = lookup.availability_zones(make_session(REGION), REGION)
    names = [z["name"] for z in zones]
    assert names == sorted(names) and f"{REGION}a" in names
    assert all(z["id"] for z in zones)


def test_image_by_id_and_by_name(moto_env):
    s = make_session(REGION)
    (by_id,) = lookup.images(s, REGION, Image(id=AMI))
    assert (by_id.image_id, by_id.root_device) == (AMI, "/dev/sda1")
    ec2 = boto3.client("ec2", REGION)
    image = ec2.describe_images(ImageIds=[AMI])["Images"][0]
    by_name = Image(name=image["Name"][:20] + "*", owner=image["OwnerId"])
    found = lookup.images(s, REGION, by_name)
    assert found and all(c.name.startswith(image["Name"][:20]) for c in found)
    assert choose_image(found, by_name, REGION).image_id.startswith("ami-")


def test_missing_images(moto_env):
    s = make_session(REGION)
    nothing = Image(name="no-such-image-*", owner="self")
    assert lookup.images(s, REGION, nothing) == []
    with pytest.raises(AwsError) as missing:  # an id AWS does not know: its own error
        lookup.images(s, REGION, Image(id="ami-12345678"))
    assert missing.value.code == "InvalidAMIID.NotFound"
    assert missing.value.message.startswith("DescribeImages on ami-12345678 failed: ")
