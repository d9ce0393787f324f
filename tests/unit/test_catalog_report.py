"""The `clusterkit spot` table and JSON built from ranked offers (catalog/report.py)."""

from __future__ import annotations

from rich.console import Console

from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.report import build_report, report_footer, report_json
from clusterkit.cli.spot import report_table

OFFERS = [
    Offer("p4d.24xlarge", "us-east-1", "us-east-1b", "use1-az1", "spot", 2.4655, 21.957642, 8),
    Offer("p4d.24xlarge", "us-east-1", "us-east-1b", "use1-az1", "on-demand", 21.957642,
          21.957642, 8),
    Offer("p4d.24xlarge", "us-west-2", "us-west-2c", "usw2-az3", "spot", 9.7315, 21.957642, 8,
          placement_score=2),
]


def _report():
    return build_report(OFFERS, count=4, instance_types=["p4d.24xlarge"],
                        regions=["us-east-1", "us-west-2"], region_errors={"eu-west-1": "denied"},
                        on_demand_source="snapshot", notes=["placement scores unknown"])


def test_json_lists_spot_offers_in_rank_order() -> None:
    data = report_json(_report())
    assert [o["az_id"] for o in data["offers"]] == ["use1-az1", "usw2-az3"]
    best = data["offers"][0]
    assert best["discount_pct"] == 88.8 and best["cluster_per_hour"] == 9.862
    assert data["offers"][1]["note"].startswith("demoted")
    assert data["region_errors"] == {"eu-west-1": "denied"}


def test_table_and_footer() -> None:
    console = Console(width=200, record=True)
    console.print(report_table(_report()))
    text = console.export_text()
    assert "us-east-1b (use1-az1)" in text and "89%" in text and "0.3082" in text
    assert "shipped snapshot" in text
    # the failed region is a row of the table, after the offers, so it cannot be missed
    rows = [line for line in text.splitlines() if "│" in line]
    assert len(rows) == 3 and "eu-west-1" in rows[-1] and "region failed: denied" in rows[-1]
    assert "(all)" in rows[-1] and "us-east-1b" in rows[0]
    assert report_footer(_report()) == ["placement scores unknown"]


def test_pricing_api_source_named_in_title() -> None:
    report = build_report(OFFERS, count=4, instance_types=["p4d.24xlarge"],
                          regions=["us-east-1"], region_errors={},
                          on_demand_source="pricing-api")
    console = Console(width=200, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "on-demand prices: Pricing API" in text and "snapshot" not in text
    assert report_json(report)["on_demand_source"] == "pricing-api"
