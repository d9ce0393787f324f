"""Ranking rule, launch order and the candidate walk (clusterkit/catalog/ranking.py).

Fixtures are small hand-made offer sets whose correct order is worked out in the
comments next to each assertion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterkit.catalog.ranking import (
    Offer,
    launch_candidates,
    rank_offers,
    walk_candidates,
)
from clusterkit.errors import AwsError, CapacityError, CredentialsError, QuotaError


def spot(t: str, region: str, az: str, price: float | None, *, od: float | None = 32.0,
         gpus: int = 8, score: int | None = None) -> Offer:
    return Offer(t, region, f"{region}{az}", f"{region[:2]}-az-{az}", "spot", price, od, gpus,
                 score)


def ondemand(t: str, region: str, az: str, price: float, gpus: int = 8) -> Offer:
    return Offer(t, region, f"{region}{az}", f"{region[:2]}-az-{az}", "on-demand", price, price,
                 gpus)


def test_cheapest_per_gpu_hour_wins() -> None:
    offers = [spot("p4d.24xlarge", "us-east-1", "a", 8.0),  # 1.00 $/GPU-h
              spot("g5.xlarge", "us-east-1", "a", 0.5, od=1.0, gpus=1),  # 0.50 $/GPU-h
              spot("p5.48xlarge", "us-west-2", "b", 12.0, od=98.0)]  # 1.50 $/GPU-h
    ranked = rank_offers(offers)
    assert [r.offer.instance_type for r in ranked] == ["g5.xlarge", "p4d.24xlarge",
                                                        "p5.48xlarge"]
    assert [r.rank for r in ranked] == [1, 2, 3]
    assert ranked[0].offer.per_gpu_hour == pytest.approx(0.5)
    assert ranked[1].offer.discount == pytest.approx(0.75)  # 8 vs 32


def test_low_placement_score_demotes_unknown_is_neutral() -> None:
    offers = [spot("p4d.24xlarge", "us-east-1", "a", 2.0, score=1),  # cheapest, but score 1
              spot("p4d.24xlarge", "us-east-1", "b", 6.0, score=None),
              spot("p4d.24xlarge", "us-east-1", "c", 7.0, score=9),
              spot("p4d.24xlarge", "us-east-1", "d", 9.0, score=3)]  # 3 is not < 3
    ranked = rank_offers(offers)
    assert [r.offer.az for r in ranked] == ["us-east-1b", "us-east-1c", "us-east-1d",
                                             "us-east-1a"]
    assert ranked[-1].demoted and "placement score 1" in ranked[-1].note
    assert not any(r.demoted for r in ranked[:-1])


def test_ties_broken_by_score_then_spec_order_then_zone() -> None:
    offers = [spot("g5.xlarge", "us-west-2", "b", 1.0, gpus=1),
              spot("g6.xlarge", "us-east-1", "a", 1.0, gpus=1),
              spot("g5.xlarge", "us-west-2", "a", 1.0, gpus=1),
              spot("g5.xlarge", "us-east-1", "c", 1.0, gpus=1, score=8)]
    ranked = rank_offers(offers, instance_types=["g5.xlarge", "g6.xlarge"],
                         regions=["us-east-1", "us-west-2"])
    # score 8 beats unknown (5); then g5 before g6 (spec order); then zone name.
    assert [(r.offer.instance_type, r.offer.az) for r in ranked] == [
        ("g5.xlarge", "us-east-1c"), ("g5.xlarge", "us-west-2a"), ("g5.xlarge", "us-west-2b"),
        ("g6.xlarge", "us-east-1a")]
    assert ranked == rank_offers(list(reversed(offers)), instance_types=["g5.xlarge",
                                 "g6.xlarge"], regions=["us-east-1", "us-west-2"])


def test_ineligible_offers_listed_last_with_reason() -> None:
    offers = [spot("p4d.24xlarge", "us-east-1", "a", None),
              spot("p4d.24xlarge", "us-east-1", "b", 40.0),  # above on-demand 32
              spot("p4d.24xlarge", "us-east-1", "c", 20.0),
              spot("c5.large", "us-east-1", "a", 0.02, od=0.1, gpus=0)]
    ranked = rank_offers(offers)
    assert ranked[0].rank == 1 and ranked[0].offer.az == "us-east-1c"
    notes = {r.offer.az + r.offer.instance_type: r.note for r in ranked[1:]}
    assert all(r.rank is None for r in ranked[1:])
    assert notes == {"us-east-1ap4d.24xlarge": "no spot price",
                     "us-east-1bp4d.24xlarge": "spot above on-demand",
                     "us-east-1ac5.large": "no GPU"}
    capped = rank_offers(offers[1:3], max_price=15.0)
    assert [r.note for r in capped] == ["over max price $15/h", "over max price $15/h"]
    # with an explicit max price above on-demand, a spot price above on-demand is allowed
    assert rank_offers(offers[1:2], max_price=50.0)[0].rank == 1


def test_cpu_only_offers_rank_by_node_price() -> None:
    offers = [spot("c5.xlarge", "us-east-1", "a", 0.05, od=0.17, gpus=0),
              spot("t3.micro", "us-east-1", "a", 0.004, od=0.01, gpus=0)]
    assert [r.offer.instance_type for r in rank_offers(offers)] == ["t3.micro", "c5.xlarge"]


def test_cpu_only_offers_rank_by_vcpu_hour_whatever_the_list_order() -> None:
    """The list is the set of types that may be used: a c5.xlarge at $0.0375/vCPU-h
    beats a c5.large at $0.0425/vCPU-h (dearer per node, cheaper per vCPU), wherever
    each is listed; equal $/vCPU-h falls back to the list order."""
    large = replace(spot("c5.large", "us-east-1", "a", 0.085, od=0.085, gpus=0), vcpus=2)
    xlarge = replace(spot("c5.xlarge", "us-east-1", "a", 0.15, od=0.17, gpus=0), vcpus=4)
    for types in (["c5.large", "c5.xlarge"], ["c5.xlarge", "c5.large"]):
        ranked = rank_offers([large, xlarge], instance_types=types)
        assert [r.offer.instance_type for r in ranked] == ["c5.xlarge", "c5.large"]
    assert xlarge.unit_cost == (pytest.approx(0.0375), "vCPU")
    same = replace(large, instance_type="m5.large")  # the same $/vCPU-h: list order
    ranked = rank_offers([large, same], instance_types=["m5.large", "c5.large"])
    assert [r.offer.instance_type for r in ranked] == ["m5.large", "c5.large"]


def test_a_mixed_list_ranks_only_its_gpu_types() -> None:
    """[c5.large, p4d.24xlarge]: the first listed is a CPU type, and never used."""
    cpu = replace(spot("c5.large", "us-east-1", "a", 0.03, od=0.085, gpus=0), vcpus=2)
    gpu = spot("p4d.24xlarge", "us-east-1", "a", 9.0)
    ranked = rank_offers([cpu, gpu], instance_types=["c5.large", "p4d.24xlarge"])
    assert [(r.rank, r.offer.instance_type, r.note) for r in ranked] == [
        (1, "p4d.24xlarge", ""), (None, "c5.large", "no GPU")]


FIXTURE = [
    # region us-west-2: p4d cheapest overall in zone b, zone a next
    spot("p4d.24xlarge", "us-west-2", "a", 10.0, score=7),  # 1.25
    spot("p4d.24xlarge", "us-west-2", "b", 8.0, score=9),  # 1.00 <- best
    spot("p5.48xlarge", "us-west-2", "a", 12.0, od=98.0, score=6),  # 1.50
    # region us-east-1: p4d 9.0 (1.125) is the second best offer overall
    spot("p4d.24xlarge", "us-east-1", "a", 9.0, score=8),  # 1.125
    spot("p4d.24xlarge", "us-east-1", "b", 4.0, score=1),  # 0.50 but demoted
    spot("p5.48xlarge", "us-east-1", "c", 11.0, od=98.0),  # 1.375
    # a region the spec does not allow, cheapest of all
    spot("p4d.24xlarge", "eu-west-1", "a", 1.0, score=10),
    ondemand("p4d.24xlarge", "us-east-1", "a", 32.77),
    ondemand("p4d.24xlarge", "us-west-2", "a", 32.77),
    ondemand("p5.48xlarge", "us-east-1", "a", 98.32),
]
TYPES = ["p4d.24xlarge", "p5.48xlarge"]
REGIONS = ["us-east-1", "us-west-2"]


def _names(offers: list[Offer]) -> list[str]:
    return [f"{o.market}:{o.instance_type}:{o.az}" for o in offers]


def test_launch_order_next_az_next_type_next_region_then_on_demand() -> None:
    order = launch_candidates(FIXTURE, count=4, market_policy="spot-then-on-demand",
                              max_price=None, instance_types=TYPES, regions=REGIONS)
    assert _names(order) == [
        "spot:p4d.24xlarge:us-west-2b", "spot:p4d.24xlarge:us-west-2a",  # next AZ
        "spot:p5.48xlarge:us-west-2a",  # next type
        "spot:p4d.24xlarge:us-east-1a", "spot:p5.48xlarge:us-east-1c",  # next region
        "spot:p4d.24xlarge:us-east-1b",  # demoted (score 1) after every good spot offer
        # on-demand: best is us-east-1 p4d (tie with us-west-2 broken by region order),
        # then the next type in that region, then the next region
        "on-demand:p4d.24xlarge:us-east-1a", "on-demand:p5.48xlarge:us-east-1a",
        "on-demand:p4d.24xlarge:us-west-2a",
    ]
    assert all(o.region != "eu-west-1" for o in order)


def test_launch_order_by_market_policy_and_filters() -> None:
    spot_only = launch_candidates(FIXTURE, count=4, market_policy="spot", max_price=None,
                                  instance_types=TYPES, regions=REGIONS)
    assert {o.market for o in spot_only} == {"spot"} and len(spot_only) == 6
    od = launch_candidates(FIXTURE, count=4, market_policy="on-demand", max_price=None,
                           instance_types=TYPES, regions=REGIONS)
    assert _names(od)[0] == "on-demand:p4d.24xlarge:us-east-1a" and len(od) == 3
    capped = launch_candidates(FIXTURE, count=4, market_policy="spot-then-on-demand",
                               max_price=9.0, instance_types=["p4d.24xlarge"],
                               regions=["us-east-1"])
    assert _names(capped) == ["spot:p4d.24xlarge:us-east-1a", "spot:p4d.24xlarge:us-east-1b"]
    with pytest.raises(ValueError):
        launch_candidates(FIXTURE, count=4, market_policy="cheap", max_price=None,
                          instance_types=TYPES, regions=REGIONS)


def _launcher(failures: dict[str, Exception]):
    tried: list[str] = []

    def try_launch(offer: Offer) -> str:
        tried.append(offer.az)
        if offer.az in failures:
            raise failures[offer.az]
        return f"fleet-{offer.az}"

    return try_launch, tried


def _capacity(az: str) -> CapacityError:
    return CapacityError(f"no capacity in {az}", code="InsufficientInstanceCapacity")


def test_walk_falls_through_capacity_errors_in_order() -> None:
    order = launch_candidates(FIXTURE, count=4, market_policy="spot-then-on-demand",
                              max_price=None, instance_types=TYPES, regions=REGIONS)
    try_launch, tried = _launcher({"us-west-2b": _capacity("b"), "us-west-2a": _capacity("a")})
    winner, attempts = walk_candidates(order, try_launch)
    # us-west-2a fails for p4d AND p5 (same zone), so us-east-1a p4d wins
    assert tried == ["us-west-2b", "us-west-2a", "us-west-2a", "us-east-1a"]
    assert (winner.instance_type, winner.az) == ("p4d.24xlarge", "us-east-1a")
    assert [a.ok for a in attempts] == [False, False, False, True]
    assert attempts[0].code == "InsufficientInstanceCapacity"
    assert attempts[-1].result == "fleet-us-east-1a"


def test_walk_stops_at_quota_error_with_hint() -> None:
    order = launch_candidates(FIXTURE, count=4, market_policy="spot", max_price=None,
                              instance_types=TYPES, regions=REGIONS)
    quota = QuotaError("VcpuLimitExceeded", code="VcpuLimitExceeded")
    try_launch, tried = _launcher({"us-west-2b": _capacity("b"), "us-west-2a": quota})
    with pytest.raises(QuotaError) as info:
        walk_candidates(order, try_launch)
    assert tried == ["us-west-2b", "us-west-2a"]
    assert "quota" in info.value.hint.lower()


@pytest.mark.parametrize("err", [CredentialsError("denied"), AwsError("boom")])
def test_walk_stops_at_other_aws_errors(err: AwsError) -> None:
    try_launch, tried = _launcher({"us-west-2a": err})
    with pytest.raises(type(err)):
        walk_candidates(FIXTURE[:2], try_launch)
    assert tried == ["us-west-2a"]


def test_walk_exhausted_lists_every_attempt() -> None:
    offers = FIXTURE[:2]
    try_launch, _ = _launcher({o.az: _capacity(o.az) for o in offers})
    with pytest.raises(CapacityError) as info:
        walk_candidates(offers, try_launch)
    text = info.value.message
    assert "2 tried" in text and "us-west-2a" in text and "us-west-2b" in text
    assert info.value.hint
    with pytest.raises(CapacityError, match="no launch candidates"):
        walk_candidates([], try_launch)


def test_when_nothing_is_left_the_cheapest_offer_left_out_is_named() -> None:
    from clusterkit.catalog.ranking import cheapest_excluded

    offers = [spot("p4d.24xlarge", "us-east-1", "a", 9.0), spot("p4d.24xlarge", "us-east-1",
                                                                "b", 2.5),
              ondemand("p4d.24xlarge", "us-east-1", "a", 32.0),
              spot("p5.48xlarge", "us-east-1", "a", 1.0)]  # not a type of the spec
    kwargs = dict(instance_types=["p4d.24xlarge"], regions=["us-east-1"])
    assert launch_candidates(offers, count=2, market_policy="spot-then-on-demand",
                             max_price=1.0, **kwargs) == []
    assert cheapest_excluded(offers, market_policy="spot-then-on-demand", max_price=1.0,
                             **kwargs) == ("p4d.24xlarge spot in us-east-1b (us-az-b) at "
                                           "$2.5000/h (over max price $1/h)")
    assert cheapest_excluded(offers, market_policy="on-demand", max_price=1.0,
                             **kwargs).startswith("p4d.24xlarge on-demand in us-east-1a")
    assert cheapest_excluded([spot("p4d.24xlarge", "us-east-1", "a", None)],
                             market_policy="spot", max_price=1.0, **kwargs) is None
