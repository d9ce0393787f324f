"""`clusterkit spot` and the launch walk against moto in server mode, with the
recorded real prices served by clusterkit_sandbox.spot_prices (moto's own spot price
history is a constant placeholder). moto implements neither the Pricing API nor
GetSpotPlacementScores, so these tests also cover the fallbacks: on-demand prices
from the shipped snapshot, placement scores unknown; where a test needs those two APIs to
answer, a botocore ``before-send`` hook returns a response in AWS's own wire shape (the
only doubles here, besides the injected errors). Capacity and quota errors are
injected in try_launch (moto never runs out of capacity); launches are real moto
RunInstances calls."""

from __future__ import annotations

import csv
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ClientError
from click.testing import CliRunner

from clusterkit.aws.errors import translate
from clusterkit.aws.offers import search_offers
from clusterkit.aws.session import client, make_session
from clusterkit.catalog import instances
from clusterkit.catalog.ranking import Offer, launch_candidates, walk_candidates
from clusterkit.cli.main import cli
from clusterkit.errors import CapacityError, QuotaError
from clusterkit_sandbox import spot_prices
from tests import support

PRICES = Path(instances.__file__).parent / "data" / "aws-prices.csv"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imagenet-p4d-spot.yaml"
AMI = "ami-12c6146b"  # one of moto's built-in images
# moto's zone table (the names a fresh account sees for these zone ids)
ZONE_NAMES = {"use1-az1": "us-east-1b", "use1-az6": "us-east-1a", "usw2-az1": "us-west-2b"}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    spot_prices.install()
    try:
        with support.moto_server() as url, pytest.MonkeyPatch.context() as mp:
            support.aws_env(mp, url)
            yield url
    finally:
        spot_prices.uninstall()


def _recorded(types: set[str], regions: set[str]) -> list[dict[str, str]]:
    with PRICES.open(newline="") as fh:
        # Local Zones (e.g. use1-atl2-az1) are not in moto's zone table, and the search
        # asks for zone-type availability-zone only
        return [r for r in csv.DictReader(fh) if r["InstanceType"] in types
                and r["Region"] in regions and r["SpotPrice"]
                and re.fullmatch(r"[a-z0-9]+-az\d+", r["AvailabilityZone"])]


def _spot_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["--json", "spot", *args])
    assert result.exit_code == 0, result.output
    # the in-process moto server prints its own complaints (no Pricing API) to stdout
    out = result.stdout
    return json.loads(out[out.index("{\n"):])


def test_spot_json_matches_recorded_prices(endpoint: str) -> None:
    data = _spot_json("--instance-types", "p4d.24xlarge,p5.48xlarge",
                      "--regions", "us-east-1,us-west-2", "--count", "4")
    rows = _recorded({"p4d.24xlarge", "p5.48xlarge"}, {"us-east-1", "us-west-2"})
    recorded = {(r["InstanceType"], r["AvailabilityZone"]): float(r["SpotPrice"]) for r in rows}
    offers = data["offers"]
    assert data["on_demand_source"] == "snapshot" and data["region_errors"] == {}
    assert any("placement scores unknown" in n for n in data["notes"])
    assert len(offers) == len(recorded)  # every recorded zone is offered in moto's table
    for offer in offers:
        assert offer["spot_price"] == pytest.approx(recorded[(offer["instance_type"],
                                                              offer["az_id"])])
    cheapest = min(recorded.items(), key=lambda kv: kv[1] / 8)
    best = offers[0]
    assert best["rank"] == 1 and (best["instance_type"], best["az_id"]) == cheapest[0]
    assert (best["az"], best["az_id"]) == ("us-east-1b", "use1-az1")
    assert best["spot_price"] == pytest.approx(2.4655)
    assert best["on_demand_price"] == pytest.approx(21.957642)
    assert best["discount_pct"] == pytest.approx(round(100 * (1 - 2.4655 / 21.957642), 1))
    assert best["per_gpu_hour"] == pytest.approx(2.4655 / 8, abs=1e-6)
    assert best["cluster_per_hour"] == pytest.approx(4 * 2.4655)
    per_gpu = [o["per_gpu_hour"] for o in offers if o["rank"] is not None]
    assert per_gpu == sorted(per_gpu)


def test_spot_table_from_example_spec(endpoint: str) -> None:
    result = CliRunner().invoke(cli, ["spot", str(EXAMPLE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stdout.splitlines() if "│" in ln]
    first = lines[0]
    assert "p4d.24xlarge" in first and "us-east-1b (use1-az1)" in first
    assert "2.4655" in first and "89%" in first and "0.3082" in first
    assert len(lines) == len(_recorded({"p4d.24xlarge"}, {"us-east-1", "us-west-2"}))
    assert "shipped snapshot" in result.stdout


def _fail_in(region: str, code: str = "UnauthorizedOperation"):
    """A before-call hook failing DescribeAvailabilityZones in one region only: the error
    is injected (moto serves every region); the other regions' calls are real."""
    def hook(model, context, **_: object) -> None:
        if model.name == "DescribeAvailabilityZones" and context.get("client_region") == region:
            raise ClientError({"Error": {"Code": code, "Message": f"injected in {region}"}},
                              model.name)
    return hook


def test_region_error_does_not_hide_others(endpoint: str) -> None:
    from rich.console import Console

    from clusterkit.aws.offers import every_region_failed
    from clusterkit.catalog.report import build_report, report_json
    from clusterkit.cli.spot import report_table

    session = make_session("us-east-1")
    session.events.register("before-call.ec2.DescribeAvailabilityZones", _fail_in("eu-west-1"))
    result = search_offers(session, instance_types=["p4d.24xlarge"],
                           regions=["eu-west-1", "us-east-1"], count=1)
    every_region_failed(result)  # one region answered: no error
    report = build_report(result.offers, count=1, instance_types=["p4d.24xlarge"],
                          regions=["eu-west-1", "us-east-1"], region_errors=result.region_errors,
                          on_demand_source=result.on_demand_source)
    data = report_json(report)
    assert list(data["region_errors"]) == ["eu-west-1"]
    assert "DescribeAvailabilityZones" in data["region_errors"]["eu-west-1"]
    assert {o["region"] for o in data["offers"]} == {"us-east-1"}
    assert len(data["offers"]) == 4  # every recorded us-east-1 zone of p4d
    console = Console(width=250, record=True)
    console.print(report_table(report))
    rows = [ln for ln in console.export_text().splitlines() if "│" in ln]
    offer_rows = [i for i, r in enumerate(rows) if "p4d.24xlarge" in r]
    failed = [i for i, r in enumerate(rows) if "eu-west-1" in r]
    assert len(offer_rows) == 4 and len(failed) == 1 and failed[0] > max(offer_rows)
    assert "region failed" in rows[failed[0]]


class _Denied(BaseHTTPRequestHandler):
    """An EC2 endpoint on 127.0.0.1 that denies every request, in EC2's XML error shape
    (a stand-in for an account without EC2 read permissions; not retried by botocore)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = (b"<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are "
                b"not authorized to perform this operation.</Message></Error></Errors>"
                b"<RequestID>r-1</RequestID></Response>")
        self.send_response(403)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_spot_exits_1_when_every_region_failed(endpoint: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Denied)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", f"http://127.0.0.1:{server.server_port}")
    try:
        result = CliRunner().invoke(cli, ["spot", "--instance-types", "p4d.24xlarge",
                                          "--regions", "us-east-1,us-west-2"])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1, result.output
    out = result.output
    assert "offer search failed in every region (2)" in out
    for region in ("us-east-1", "us-west-2"):
        assert f"{region}: DescribeAvailabilityZones on {region} failed: " \
            "UnauthorizedOperation" in out
    assert "Traceback" not in out


def test_price_request_is_now_linux_all_types_one_call(endpoint: str) -> None:
    """What goes over the wire: StartTime now (the price in effect), Linux/UNIX only,
    every candidate type in the one call of the region."""
    session = make_session("us-east-1")
    sent: list[dict] = []
    session.events.register("before-call.ec2.DescribeSpotPriceHistory",
                            lambda params, **_: sent.append(dict(params["body"])))
    before = datetime.now(timezone.utc)
    search_offers(session, instance_types=["p4d.24xlarge", "p5.48xlarge", "g5.xlarge"],
                  regions=["us-east-1"], count=1)
    after = datetime.now(timezone.utc)
    assert len(sent) == 1
    body = sent[0]
    start = datetime.fromisoformat(body["StartTime"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= start <= after
    assert body["ProductDescription.1"] == "Linux/UNIX" and "ProductDescription.2" not in body
    assert sorted(v for k, v in body.items() if k.startswith("InstanceType.")) == [
        "g5.xlarge", "p4d.24xlarge", "p5.48xlarge"]


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: object) -> Iterator[bytes]:
        yield self.body


API_PRICES = {("p4d.24xlarge", "us-east-1"): 32.7726, ("p4d.24xlarge", "us-west-2"): 30.5}


def _pricing_answer(request: AWSPreparedRequest, **_: object) -> AWSResponse:
    """GetProducts as the real Pricing API answers it (JSON 1.1, PriceList of JSON strings);
    moto has no Pricing API, so this before-send hook stands in for the endpoint."""
    filters = {f["Field"]: f["Value"] for f in json.loads(request.body)["Filters"]}
    usd = API_PRICES[(filters["instanceType"], filters["regionCode"])]
    product = {"product": {"attributes": {"instanceType": filters["instanceType"]}},
               "terms": {"OnDemand": {"T.JRTCKXETXF": {"priceDimensions": {
                   "T.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs",
                                               "pricePerUnit": {"USD": f"{usd:.10f}"}}}}}}}
    body = json.dumps({"FormatVersion": "aws_v1", "PriceList": [json.dumps(product)]})
    return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"},
                       _Raw(body.encode()))


def test_on_demand_from_pricing_api_when_it_answers(endpoint: str) -> None:
    session = make_session("us-east-1")
    session.events.register("before-send.pricing.GetProducts", _pricing_answer)
    result = search_offers(session, instance_types=["p4d.24xlarge"],
                           regions=["us-east-1", "us-west-2"], count=4)
    assert result.on_demand_source == "pricing-api"
    assert result.api_calls["GetProducts"] == 2  # one per (type, region)
    assert not any("snapshot" in n for n in result.notes)
    spot = [o for o in result.offers if o.market == "spot"]
    assert len(spot) == 8
    for offer in spot:
        assert offer.on_demand_price == API_PRICES[(offer.instance_type, offer.region)]
    best = min(spot, key=lambda o: o.price)
    assert best.discount == pytest.approx(1 - 2.4655 / 32.7726)


def test_one_price_call_per_region(endpoint: str) -> None:
    session = make_session("us-east-1")
    seen: list[tuple[int, int]] = []
    result = search_offers(session, instance_types=["p4d.24xlarge", "p5.48xlarge", "g5.xlarge"],
                           regions=["us-east-1", "us-west-2", "eu-west-1"], count=2,
                           progress=lambda done, total, _what: seen.append((done, total)))
    calls = result.api_calls
    assert calls["DescribeSpotPriceHistory"] == 3
    assert calls["DescribeAvailabilityZones"] == 3
    assert calls["DescribeInstanceTypeOfferings"] == 3
    assert calls["GetSpotPlacementScores"] == 3  # one per type, all regions at once
    # regions ask concurrently; after the first failure the snapshot is used
    assert 1 <= calls["GetProducts"] <= 3
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert {o.market for o in result.offers} == {"spot", "on-demand"}


# (region, zone id) -> score; the other zones are left out of the answer (unknown)
SCORES = {("us-east-1", "use1-az1"): 1, ("us-east-1", "use1-az6"): 9,
          ("us-west-2", "usw2-az1"): 7}
SCORE_REQUESTS: list[dict[str, str]] = []


def _scores_answer(request: AWSPreparedRequest, **_: object) -> AWSResponse:
    """GetSpotPlacementScores in EC2's XML shape (moto lacks it); it also records the
    request, so the test can check what was asked."""
    body = request.body.decode() if isinstance(request.body, bytes) else request.body
    SCORE_REQUESTS.append(dict(urllib.parse.parse_qsl(body)))
    items = "".join(f"<item><region>{r}</region><availabilityZoneId>{z}</availabilityZoneId>"
                    f"<score>{s}</score></item>" for (r, z), s in SCORES.items())
    xml = ('<GetSpotPlacementScoresResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
           f"<requestId>r-1</requestId><spotPlacementScoreSet>{items}"
           "</spotPlacementScoreSet></GetSpotPlacementScoresResponse>")
    return AWSResponse(request.url, 200, {"Content-Type": "text/xml"}, _Raw(xml.encode()))


def test_placement_scores_for_the_gang_demote_the_cheapest(endpoint: str) -> None:
    from clusterkit.catalog.report import build_report

    session = make_session("us-east-1")
    session.events.register("before-send.ec2.GetSpotPlacementScores", _scores_answer)
    SCORE_REQUESTS.clear()
    result = search_offers(session, instance_types=["p4d.24xlarge"],
                           regions=["us-east-1", "us-west-2"], count=4)
    assert len(SCORE_REQUESTS) == 1
    asked = SCORE_REQUESTS[0]
    assert asked["TargetCapacity"] == "4" and asked["SingleAvailabilityZone"] == "true"
    assert asked["InstanceType.1"] == "p4d.24xlarge"
    assert {asked["RegionName.1"], asked["RegionName.2"]} == {"us-east-1", "us-west-2"}
    assert not any("placement scores unknown" in n for n in result.notes)
    spot = {o.az_id: o.placement_score for o in result.offers if o.market == "spot"}
    assert spot["use1-az1"] == 1 and spot["use1-az6"] == 9 and spot["usw2-az3"] is None
    report = build_report(result.offers, count=4, instance_types=["p4d.24xlarge"],
                          regions=["us-east-1", "us-west-2"], region_errors={},
                          on_demand_source=result.on_demand_source)
    # use1-az1 is by far the cheapest (2.4655) but score 1 < 3: ranked last of the eight
    order = [r.offer.az_id for r in report.ranked]
    assert order[0] == "use1-az6" and order[-1] == "use1-az1"
    assert report.ranked[-1].rank == 8 and report.ranked[-1].demoted
    walk = launch_candidates(result.offers, count=4, market_policy="spot", max_price=None,
                             instance_types=["p4d.24xlarge"], regions=["us-east-1", "us-west-2"])
    assert walk[0].az_id == "use1-az6" and walk[-1].az_id == "use1-az1"


def test_usage_errors_exit_2(endpoint: str) -> None:
    assert CliRunner().invoke(cli, ["spot"]).exit_code == 2
    assert CliRunner().invoke(cli, ["spot", "--instance-types", "p4d.24xlarge",
                                    "--count", "0"]).exit_code == 2


def _failing(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"injected {code}"}}, "RunInstances")


def _launcher(fail: dict[str, str]):
    ec2 = client(make_session("us-east-1"), "ec2", "us-east-1")
    tried: list[str] = []

    def try_launch(offer: Offer) -> list[str]:
        tried.append(f"{offer.market}:{offer.az}")
        if offer.az in fail:
            raise translate(_failing(fail[offer.az]), "RunInstances", offer.az)
        made = client(make_session(offer.region), "ec2", offer.region).run_instances(
            ImageId=AMI, InstanceType=offer.instance_type, MinCount=2, MaxCount=2,
            Placement={"AvailabilityZone": offer.az})
        return [i["InstanceId"] for i in made["Instances"]]

    return try_launch, tried, ec2


def _candidates(policy: str) -> list[Offer]:
    result = search_offers(make_session("us-east-1"), instance_types=["p4d.24xlarge"],
                           regions=["us-east-1", "us-west-2"], count=2)
    return launch_candidates(result.offers, count=2, market_policy=policy, max_price=None,
                             instance_types=["p4d.24xlarge"], regions=["us-east-1", "us-west-2"])


def test_walk_falls_through_injected_capacity_errors(endpoint: str) -> None:
    order = _candidates("spot-then-on-demand")
    # recorded prices: us-east-1 zones by price b, a, d, c; then us-west-2; then on-demand
    assert [o.az for o in order[:4]] == ["us-east-1b", "us-east-1a", "us-east-1d",
                                         "us-east-1c"]
    assert [o.market for o in order[-8:]] == ["on-demand"] * 8
    fail = {z: "InsufficientInstanceCapacity" for z in ("us-east-1b", "us-east-1a")}
    fail["us-east-1d"] = "SpotMaxPriceTooLow"
    try_launch, tried, ec2 = _launcher(fail)
    winner, attempts = walk_candidates(order, try_launch)
    assert tried == ["spot:us-east-1b", "spot:us-east-1a", "spot:us-east-1d", "spot:us-east-1c"]
    assert (winner.az, winner.market) == ("us-east-1c", "spot")
    assert [a.code for a in attempts[:3]] == ["InsufficientInstanceCapacity"] * 2 + [
        "SpotMaxPriceTooLow"]
    ids = attempts[-1].result
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"][0]["Instances"]
    assert {i["Placement"]["AvailabilityZone"] for i in found} == {"us-east-1c"}
    ec2.terminate_instances(InstanceIds=ids)


def test_spot_market_never_falls_back_to_on_demand(endpoint: str) -> None:
    order = _candidates("spot")
    assert order and {o.market for o in order} == {"spot"}
    try_launch, tried, _ = _launcher({o.az: "InsufficientInstanceCapacity" for o in order})
    with pytest.raises(CapacityError) as info:
        walk_candidates(order, try_launch)
    assert tried == [f"spot:{o.az}" for o in order] and len(tried) == 8
    assert "8 tried" in info.value.message


def test_walk_stops_at_quota_error(endpoint: str) -> None:
    order = _candidates("spot")
    try_launch, tried, _ = _launcher({"us-east-1b": "InsufficientInstanceCapacity",
                                      "us-east-1a": "VcpuLimitExceeded"})
    with pytest.raises(QuotaError) as info:
        walk_candidates(order, try_launch)
    assert tried == ["spot:us-east-1b", "spot:us-east-1a"]
    assert "quota" in (info.value.hint or "").lower()


@pytest.fixture
def atlanta(endpoint: str) -> Iterator[object]:
    """Emulated: moto's zone table has no Local Zones, so the Atlanta Local Zone of the
    recorded prices (use1-atl2-az1, us-east-1-atl-2a) is added to it for this test (and
    removed after); the recorded-price server then serves its prices like any zone's."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend, Zone

    zone = Zone("us-east-1-atl-2a", "us-east-1", "use1-atl2-az1", zone_type="local-zone")
    zone.opt_in_status = "not-opted-in"  # type: ignore[attr-defined]
    RegionsAndZonesBackend.zones["us-east-1"].append(zone)
    try:
        yield zone
    finally:
        RegionsAndZonesBackend.zones["us-east-1"].remove(zone)


def _atlanta_offer(session) -> Offer:
    result = search_offers(session, instance_types=["p5.48xlarge"], regions=["us-east-1"],
                           count=2)
    return next(o for o in result.offers if o.az_id == "use1-atl2-az1" and o.market == "spot")


def test_local_zone_ranked_only_when_opted_in_with_a_subnet(atlanta) -> None:
    """use1-atl2-az1 is the cheapest recorded p5.48xlarge zone ($10.2397/h)."""
    session = make_session("us-east-1")
    walk = lambda offers: launch_candidates(  # noqa: E731
        offers, count=2, market_policy="spot", max_price=None,
        instance_types=["p5.48xlarge"], regions=["us-east-1"])
    offer = _atlanta_offer(session)
    assert offer.price == pytest.approx(10.2397) and offer.zone_type.value == "local-zone"
    assert offer.blocked == "Local Zone: needs opt-in to its zone group and a subnet in the VPC"
    assert "use1-atl2-az1" not in [o.az_id for o in walk([offer])]

    atlanta.opt_in_status = "opted-in"
    offer = _atlanta_offer(session)
    assert offer.blocked == "Local Zone: needs a subnet in the VPC"

    ec2 = client(session, "ec2", "us-east-1")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]
    subnet = ec2.create_subnet(VpcId=vpc["VpcId"], CidrBlock="172.31.240.0/24",
                               AvailabilityZone="us-east-1-atl-2a")["Subnet"]["SubnetId"]
    try:
        offer = _atlanta_offer(session)
        assert offer.blocked == ""
        assert [o.az_id for o in walk([offer])] == ["use1-atl2-az1"]
    finally:
        ec2.delete_subnet(SubnetId=subnet)
