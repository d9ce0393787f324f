"""clusterkit_sandbox.spot_prices against moto in server mode: the AWS response shape,
filters and paging of DescribeSpotPriceHistory; plus the Pricing API price parser on a
GetProducts item in the shape AWS returns (moto has no Pricing API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone

import boto3
import pytest

from clusterkit.aws.pricing import parse_price_list, product_filters
from clusterkit_sandbox import spot_prices
from tests import support


@pytest.fixture(scope="module")
def ec2() -> Iterator[object]:
    assert spot_prices.install() == 1756  # 1780 rows, 24 without a spot price
    try:
        with support.moto_server() as url:
            yield boto3.client("ec2", endpoint_url=url, region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
    finally:
        spot_prices.uninstall()


def test_shape_and_zone_names(ec2) -> None:
    got = ec2.describe_spot_price_history(InstanceTypes=["p4d.24xlarge"],
                                          ProductDescriptions=["Linux/UNIX"],
                                          StartTime=datetime.now(timezone.utc))
    history = got["SpotPriceHistory"]
    zones = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()
             ["AvailabilityZones"]}
    by_id = {zones[h["AvailabilityZone"]]: h["SpotPrice"] for h in history}
    assert by_id == {"use1-az1": "2.465500", "use1-az2": "8.191500", "use1-az4": "8.120300",
                     "use1-az6": "7.879900"}
    assert {h["ProductDescription"] for h in history} == {"Linux/UNIX"}
    assert all(isinstance(h["Timestamp"], datetime) for h in history)


def test_filters_and_paging(ec2) -> None:
    pages = list(ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=["p4d.24xlarge", "p5.48xlarge"], PaginationConfig={"PageSize": 4}))
    assert [len(p["SpotPriceHistory"]) for p in pages] == [4, 4, 2]
    one = ec2.describe_spot_price_history(Filters=[
        {"Name": "availability-zone", "Values": ["us-east-1b"]},
        {"Name": "instance-type", "Values": ["p4d.24xlarge"]}])["SpotPriceHistory"]
    assert [(h["InstanceType"], h["SpotPrice"]) for h in one] == [("p4d.24xlarge", "2.465500")]
    assert ec2.describe_spot_price_history(InstanceTypes=["p4d.24xlarge"],
                                           ProductDescriptions=["Windows"])[
        "SpotPriceHistory"] == []


def test_parse_price_list_aws_shape() -> None:
    item = {"product": {"attributes": {"instanceType": "p4d.24xlarge"}},
            "terms": {"OnDemand": {"X.JRTCKXETXF": {"priceDimensions": {
                "X.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "32.7726"}}}}}}}
    zero = {"terms": {"OnDemand": {"Y": {"priceDimensions": {
        "Z": {"unit": "Hrs", "pricePerUnit": {"USD": "0.0000000000"}}}}}}}
    assert parse_price_list([json.dumps(item), json.dumps(zero)]) == pytest.approx(32.7726)
    assert parse_price_list([]) is None
    fields = {f["Field"]: f["Value"] for f in product_filters("p4d.24xlarge", "us-west-2")}
    assert fields["regionCode"] == "us-west-2" and fields["operatingSystem"] == "Linux"
