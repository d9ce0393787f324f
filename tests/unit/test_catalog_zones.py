"""Local and Wavelength Zones: recognised by AWS's ZoneType or by their id/name shape,
ranked only when usable (clusterkit/catalog/zones.py, ranking.py)."""

from __future__ import annotations

import pytest

from clusterkit.catalog.ranking import Offer, launch_candidates, rank_offers
from clusterkit.catalog.zones import ZoneType, zone_block, zone_type

AZ, LZ, WL = ZoneType.AVAILABILITY_ZONE, ZoneType.LOCAL_ZONE, ZoneType.WAVELENGTH_ZONE


@pytest.mark.parametrize(("zone", "reported", "kind"), [
    ("use1-az4", None, AZ), ("us-east-1a", None, AZ), ("usgw1-az1", None, AZ),
    ("use1-atl2-az1", None, LZ), ("usw2-lax1-az2", None, LZ), ("us-west-2-lax-1a", None, LZ),
    ("usw2-wl1-sfo-wlz1", None, WL), ("us-west-2-wl1-sfo-wlz-1", None, WL),
    ("us-east-1-atl-2a", "local-zone", LZ), ("odd", "availability-zone", AZ),
    ("odd", "outpost-zone", LZ),  # a kind this version does not know is no plain AZ
])
def test_zone_type(zone: str, reported: str | None, kind: ZoneType) -> None:
    assert zone_type(zone, reported) is kind


@pytest.mark.parametrize(("kind", "opted_in", "subnet", "why"), [
    (AZ, None, None, ""),
    (AZ, False, False, ""),
    (LZ, True, True, ""),
    (LZ, False, True, "Local Zone: needs opt-in to its zone group"),
    (LZ, True, False, "Local Zone: needs a subnet in the VPC"),
    (WL, False, False, "Wavelength Zone: needs opt-in to its zone group and a subnet in the VPC"),
    (LZ, None, None, "Local Zone: needs opt-in to its zone group and a subnet in the VPC "
                     "(not ranked offline)"),
])
def test_zone_block(kind: ZoneType, opted_in: bool | None, subnet: bool | None,
                    why: str) -> None:
    assert zone_block(kind, opted_in=opted_in, has_subnet=subnet) == why


def _offer(az_id: str, price: float, blocked: str = "") -> Offer:
    kind = zone_type(az_id)
    return Offer("p5.48xlarge", "us-east-1", az_id, az_id, "spot", price, 98.0, 8,
                 zone_type=kind, blocked=blocked)


def test_blocked_local_zone_is_not_ranked_even_when_cheapest() -> None:
    atl = _offer("use1-atl2-az1", 10.24, "Local Zone: needs opt-in to its zone group")
    offers = [atl, _offer("use1-az6", 17.63), _offer("use1-az2", 19.25)]
    ranked = rank_offers(offers)
    assert [(r.rank, r.offer.az_id) for r in ranked] == [
        (1, "use1-az6"), (2, "use1-az2"), (None, "use1-atl2-az1")]
    assert ranked[-1].note == "Local Zone: needs opt-in to its zone group"
    walk = launch_candidates(offers, count=2, market_policy="spot", max_price=None,
                             instance_types=["p5.48xlarge"], regions=["us-east-1"])
    assert [o.az_id for o in walk] == ["use1-az6", "use1-az2"]


def test_usable_local_zone_is_ranked_by_price() -> None:
    offers = [_offer("use1-az6", 17.63), _offer("use1-atl2-az1", 10.24)]
    walk = launch_candidates(offers, count=2, market_policy="spot", max_price=None,
                             instance_types=["p5.48xlarge"], regions=["us-east-1"])
    assert [o.az_id for o in walk] == ["use1-atl2-az1", "use1-az6"]


def test_offline_plan_marks_local_zone_and_never_picks_it(tmp_path) -> None:
    """The issue's case: the p4d example with p5.48xlarge picked use1-atl2-az1 (Atlanta,
    $10.24/h in the recorded prices). Offline, opt-in and subnet cannot be checked."""
    from pathlib import Path

    from clusterkit.cluster.provision.planning import do_plan
    from clusterkit.plan.spend import plan_lines

    example = Path(__file__).parents[2] / "examples" / "imagenet-p4d-spot.yaml"
    spec = tmp_path / "p5.yaml"
    spec.write_text(example.read_text().replace("[p4d.24xlarge]", "[p5.48xlarge]"))
    plan = do_plan(str(spec), offline=True)
    lines = plan_lines(plan)
    assert plan.choice is not None
    assert zone_type(plan.choice.az or "") is ZoneType.AVAILABILITY_ZONE
    assert (plan.choice.region, plan.choice.az) == ("us-west-2", "usw2-az1")  # $12.69/h
    marked = [ln for ln in lines if "use1-atl2-az1" in ln]
    assert marked == ["note: use1-atl2-az1 is a Local Zone of us-east-1 (p5.48xlarge spot "
                      "$10.2397/h): not ranked; it needs opt-in to its zone group and a "
                      "subnet in the VPC"]
