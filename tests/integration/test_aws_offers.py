"""aws.offers against the emulator over HTTP: the data one search returns. (The search's
call pattern, recorded prices, errors per region and ranking are in
test_spot_search.py.)"""

from __future__ import annotations

import pytest

from clusterkit.aws.offers import SearchResult, every_region_failed, search_offers, short
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError, UsageError
from clusterkit.kinds import Market
from tests.integration.conftest import REGION


def test_one_spot_and_one_on_demand_offer_per_zone(moto_env):
    result = search_offers(make_session(REGION), instance_types=["c5.large"],
                           regions=[REGION], count=2, use_pricing_api=False)
    assert result.count == 2 and result.region_errors == {}
    assert result.on_demand_source == "snapshot"
    zones = sorted({o.az for o in result.offers})
    assert zones and all(z.startswith(REGION) for z in zones)
    for market in (Market.SPOT, Market.ON_DEMAND):
        assert sorted(o.az for o in result.offers if o.market is market) == zones
    on_demand = [o for o in result.offers if o.market is Market.ON_DEMAND]
    assert all(o.price == o.on_demand_price for o in on_demand)
    assert {o.instance_type for o in result.offers} == {"c5.large"}
    assert result.api_calls["DescribeSpotPriceHistory"] >= 1


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"instance_types": [], "regions": [REGION], "count": 1}, "no instance types"),
    ({"instance_types": ["c5.large"], "regions": [], "count": 1}, "no regions"),
    ({"instance_types": ["c5.large"], "regions": [REGION], "count": 0}, "at least 1"),
    ({"instance_types": ["c5.large"], "regions": ["us-east-9"], "count": 1}, "us-east-9"),
])
def test_bad_arguments_are_usage_errors(moto_env, kwargs, says):
    with pytest.raises(UsageError, match=says):
        search_offers(make_session(REGION), **kwargs)


def test_every_region_failed():
    every_region_failed(SearchResult([], {}, "snapshot"))  # nothing asked: nothing failed
    with pytest.raises(AwsError) as caught:
        every_region_failed(SearchResult([], {"eu-west-1": "denied", REGION: "timeout"},
                                         "snapshot"))
    assert caught.value.message.splitlines() == [
        "the offer search failed in every region (2):", "  eu-west-1: denied",
        f"  {REGION}: timeout"]


def test_short():
    assert short("a\n  b") == "a b"
    assert short("x" * 200, limit=10) == "x" * 9 + "…"
