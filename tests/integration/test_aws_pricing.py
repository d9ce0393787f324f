"""aws.pricing against the emulator over HTTP. moto serves no Pricing API and no spot
placement scores: on-demand prices fall back to the shipped snapshot (saying why), and
the placement-score call fails as a translated AwsError."""

from __future__ import annotations

import pytest

from clusterkit.aws.pricing import (
    OnDemandPrices,
    describe_instance_types,
    lookup_client,
    placement_scores,
)
from clusterkit.aws.session import make_session
from clusterkit.catalog.prices import on_demand_price
from clusterkit.errors import AwsError
from tests.integration.conftest import REGION


def test_on_demand_falls_back_to_the_snapshot(moto_env):
    prices = OnDemandPrices(make_session(REGION))
    asked: list[str] = []
    prices.count_call = asked.append
    assert prices.price("c5.large", REGION) == on_demand_price("c5.large", REGION)
    assert prices.source == "snapshot"
    assert prices.api_error is not None and prices.api_error.startswith("GetProducts failed")
    prices.price("c5.xlarge", REGION)
    assert asked == ["GetProducts"]  # after one failure the API is not asked again


def test_snapshot_only_when_told():
    prices = OnDemandPrices(None, use_api=False)
    assert prices.price("c5.large", REGION) == on_demand_price("c5.large", REGION)
    assert prices.api_error == "Pricing API not asked"


def test_placement_scores_unavailable_is_translated(moto_env):
    ec2 = lookup_client(make_session(REGION), REGION)
    assert ec2.meta.config.retries["total_max_attempts"] == 3  # few retries: optional
    with pytest.raises(AwsError) as caught:
        placement_scores(ec2, "c5.large", [REGION], 2)
    assert caught.value.message.startswith("GetSpotPlacementScores on c5.large failed")


def test_instance_types_unknown_ones_left_out(moto_env):
    s = make_session(REGION)
    found = describe_instance_types(s, REGION, ["c5.large", "zz.huge", "m5.large"])
    assert sorted(i["InstanceType"] for i in found) == ["c5.large", "m5.large"]
    assert describe_instance_types(s, REGION, ["zz.huge"]) == []
