"""The shipped price snapshot (clusterkit/catalog/prices.py)."""

from __future__ import annotations

import pytest

from clusterkit.catalog import prices


def test_on_demand_from_snapshot() -> None:
    assert prices.on_demand_price("p4d.24xlarge", "us-east-1") == pytest.approx(21.957642)
    assert prices.on_demand_price("c5.large", "af-south-1") == pytest.approx(0.114)
    assert prices.on_demand_price("p5e.48xlarge", "us-east-1") is None  # empty in source
    assert prices.on_demand_price("p4d.24xlarge", "mars-north-1") is None


def test_spot_per_zone_id() -> None:
    spot = prices.spot_snapshot("p4d.24xlarge", "us-east-1")
    assert spot == {"use1-az1": 2.4655, "use1-az2": 8.1915, "use1-az4": 8.1203,
                    "use1-az6": 7.8799}
    assert prices.spot_snapshot("nope.large", "us-east-1") == {}


def test_snapshot_shape() -> None:
    rows = prices.snapshot_rows()
    assert len(rows) == 1780
    assert sum(1 for r in rows if r.spot is None) == 24
    assert "us-west-2" in prices.regions_with("p5.48xlarge")


def test_csv_round_trip() -> None:
    text = prices.format_price_csv([{"InstanceType": "a.b", "Price": "1.5", "SpotPrice": "",
                                     "Region": "r-1", "AvailabilityZone": "r1-az1"}])
    assert prices.parse_price_csv(text) == [prices.PriceRow("a.b", "r-1", "r1-az1", 1.5, None)]
