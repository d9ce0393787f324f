"""`clusterkit --sandbox up` falls through capacity errors in the order the spot guide
(docs/howto/spot-search.md, "What `up` tries") documents, and a quota error stops the walk at once.

Runs the real CLI (click's CliRunner, in process) against the sandbox: moto in server
mode in its own process, serving the recorded spot prices of
clusterkit/catalog/data/aws-prices.csv. The only test double is the *failure*: a botocore
``before-call`` hook on the session the CLI makes raises InsufficientInstanceCapacity (or
VcpuLimitExceeded) for the first K RunInstances calls, because the emulator never runs
out of capacity. Every other call, and every RunInstances after the K-th, is real HTTP.

The expected order is derived here from the CSV and the rule as the spot guide words it, not
from clusterkit's ranking code (which is only cross-checked).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from click.testing import CliRunner

from clusterkit.cli.main import cli
from tests import support
from tests.integration.conftest import leftovers

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "clusterkit" / "catalog" / "data" / "aws-prices.csv"
TYPES = ["c5.large", "t3.micro"]  # spec order; both CPU-only, both priced in both regions
REGIONS = ["us-east-1", "us-east-2"]  # spec order; us-east-2 holds the cheapest offer
TAG = "clusterkit:cluster"
SPEC = """\
name: {name}
region: us-east-1
regions: [us-east-1, us-east-2]
nodes:
  count: 2
  instance_types: [c5.large, t3.micro]
  market: spot-then-on-demand
  image: {{id: ami-1e749f67}}
  placement_group: false
  root_volume: {{size_gb: 8, type: gp3}}
ssh:
  user: ubuntu
"""
ATTEMPT = re.compile(r"^launch attempt (\d+)/(\d+): (\S+) (spot|on-demand) in (\S+) \((\S+)\)$")

Key = tuple[str, str, str, str]  # (type, region, AZ name, market)


@dataclass
class FailRunInstances:
    """before-call hook: records every RunInstances as (type, region, AZ, market) and
    raises ``code`` for the first ``k`` of them."""

    k: int
    code: str = "InsufficientInstanceCapacity"
    seen: list[Key] = field(default_factory=list)

    def __call__(self, model: Any, params: dict[str, Any], request_signer: Any,
                 **_: Any) -> None:
        body = params["body"]
        market = "spot" if body.get("InstanceMarketOptions.MarketType") == "spot" \
            else "on-demand"
        self.seen.append((body["InstanceType"], request_signer.region_name,
                          body["Placement.AvailabilityZone"], market))
        if len(self.seen) <= self.k:
            raise ClientError({"Error": {"Code": self.code, "Message": "injected by the test"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, model.name)


# --- the expected order, from the recorded prices and the guide's rule --------------

def _recorded() -> tuple[dict[tuple[str, str, str], float], dict[tuple[str, str], float]]:
    """(type, region, zone id) -> spot $/h, and (type, region) -> on-demand $/h."""
    spot: dict[tuple[str, str, str], float] = {}
    on_demand: dict[tuple[str, str], float] = {}
    with PRICES.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["InstanceType"] in TYPES and row["Region"] in REGIONS:
                on_demand[(row["InstanceType"], row["Region"])] = float(row["Price"])
                if row["SpotPrice"]:
                    spot[(row["InstanceType"], row["Region"], row["AvailabilityZone"])] = \
                        float(row["SpotPrice"])
    return spot, on_demand


def _zones(region: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The emulator's zone name -> id, and the (type, zone name) it offers."""
    ec2 = boto3.client("ec2", region)
    names = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones(Filters=[
        {"Name": "zone-type", "Values": ["availability-zone"]}])["AvailabilityZones"]}
    offered = {(o["InstanceType"], o["Location"]) for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": TYPES}])["InstanceTypeOfferings"]}
    return names, offered


def _grouped(ranked: list[tuple[float, Key]]) -> list[Key]:
    """docs/howto/spot-search.md: next AZ of the same type and region, then the next type in that region,
    then the next region; groups in the order of their best offer."""
    region_at: dict[str, int] = {}
    type_at: dict[tuple[str, str], int] = {}
    for _, (itype, region, _az, _m) in ranked:
        region_at.setdefault(region, len(region_at))
        type_at.setdefault((region, itype), len(type_at))
    return [key for _, key in sorted(ranked, key=lambda r: (region_at[r[1][1]],
                                                            type_at[(r[1][1], r[1][0])]))]


def expected_order() -> list[Key]:
    """Every offer in an AZ where the emulator offers the type; spot ones eligible with a
    recorded price not above on-demand (no max_price in the spec). All CPU-only, placement
    scores unknown (neutral): sort by $/node-hour, then spec `instance_types` position,
    then `regions` position, then zone name. Spot groups first, then on-demand groups."""
    spot, on_demand = _recorded()
    by_market: dict[str, list[tuple[float, Key]]] = {"spot": [], "on-demand": []}
    for region in REGIONS:
        names, offered = _zones(region)
        for itype, zone in sorted(offered):
            od = on_demand[(itype, region)]
            by_market["on-demand"].append((od, (itype, region, zone, "on-demand")))
            price = spot.get((itype, region, names[zone]))
            if price is not None and price <= od:
                by_market["spot"].append((price, (itype, region, zone, "spot")))
    out: list[Key] = []
    for market in ("spot", "on-demand"):
        ranked = sorted(by_market[market], key=lambda r: (
            r[0], TYPES.index(r[1][0]), REGIONS.index(r[1][1]), r[1][2]))
        out += _grouped(ranked)
    return out


# --- fixtures and helpers -------------------------------------------------------------

@pytest.fixture
def spec(sandbox_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A spec with a fresh cluster name, a HOME holding the user's SSH key, no agent."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    support.user_ssh_key(tmp_path)
    path = tmp_path / "fallback.yaml"
    path.write_text(SPEC.format(name=support.unique_name("fb")))
    yield path
    _cli(monkeypatch, None, "down", str(path), "--yes")  # after a failed assert, too


def _cli(monkeypatch: pytest.MonkeyPatch, inject: FailRunInstances | None, *args: str):
    """`clusterkit --sandbox ARGS` with ``inject`` hooked on the session it makes."""
    import clusterkit.aws.session as common  # Runtime.make imports it when it makes one

    real = common.make_session

    def make_session(*a: Any, **kw: Any) -> Any:
        session = real(*a, **kw)
        if inject is not None:
            session.events.register("before-call.ec2.RunInstances", inject)
        return session

    with monkeypatch.context() as m:
        m.setattr(common, "make_session", make_session)
        return CliRunner().invoke(cli, ["--sandbox", *args], catch_exceptions=False)


def _printed_attempts(output: str) -> tuple[list[Key], set[int]]:
    """The (type, region, AZ, market) of each `launch attempt n/N` line, and the N seen."""
    keys, totals = [], set()
    for line in output.splitlines():
        found = ATTEMPT.match(line.strip())
        if found:
            n, total, itype, market, zone, _zone_id = found.groups()
            assert int(n) == len(keys) + 1, line
            totals.add(int(total))
            keys.append((itype, zone[:-1], zone, market))
    return keys, totals


def _cluster_instances(name: str, region: str) -> list[dict[str, Any]]:
    ec2 = boto3.client("ec2", region)
    return [i for r in ec2.describe_instances(Filters=[
        {"Name": f"tag:{TAG}", "Values": [name]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
        for i in r["Instances"]]


def _down_leaves_nothing(monkeypatch: pytest.MonkeyPatch, spec: Path, name: str) -> None:
    down = _cli(monkeypatch, None, "down", str(spec), "--yes")
    assert down.exit_code == 0, down.output
    for region in REGIONS:
        assert leftovers(name, region) == {}, region
        assert _cluster_instances(name, region) == []


def _name(spec: Path) -> str:
    return spec.read_text().split("\n")[0].split(": ")[1]


# --- tests ----------------------------------------------------------------------------

def test_expected_order_from_recorded_prices(sandbox_env) -> None:
    """The derivation above, pinned by hand from the CSV rows (zone ids via moto's
    table: us-east-1 a=az6 b=az1 c=az2 d=az4 f=az5, us-east-2 a=az1 b=az2 c=az3),
    and cross-checked against clusterkit's own search + launch_candidates."""
    from clusterkit.aws.offers import search_offers
    from clusterkit.aws.session import make_session
    from clusterkit.catalog.ranking import launch_candidates

    order = expected_order()
    spot = [(t, z) for t, _r, z, m in order if m == "spot"]
    # us-east-2 has the cheapest offer (t3.micro 0.0031 in use2-az2), so it goes first,
    # although the spec lists us-east-1 first; t3.micro (~$0.004) before c5.large (~$0.03)
    assert spot == [
        ("t3.micro", "us-east-2b"), ("t3.micro", "us-east-2a"), ("t3.micro", "us-east-2c"),
        ("c5.large", "us-east-2c"), ("c5.large", "us-east-2a"), ("c5.large", "us-east-2b"),
        ("t3.micro", "us-east-1f"), ("t3.micro", "us-east-1c"), ("t3.micro", "us-east-1a"),
        ("t3.micro", "us-east-1d"), ("t3.micro", "us-east-1b"),
        ("c5.large", "us-east-1a"), ("c5.large", "us-east-1b"), ("c5.large", "us-east-1c"),
        ("c5.large", "us-east-1f"), ("c5.large", "us-east-1d")]
    # on-demand prices are equal across regions: spec order decides (us-east-1 first);
    # us-east-1e offers neither type in the emulator
    assert [(t, z) for t, _r, z, m in order if m == "on-demand"] == [
        *[("t3.micro", f"us-east-1{x}") for x in "abcdf"],
        *[("c5.large", f"us-east-1{x}") for x in "abcdf"],
        *[("t3.micro", f"us-east-2{x}") for x in "abc"],
        *[("c5.large", f"us-east-2{x}") for x in "abc"]]

    result = search_offers(make_session("us-east-1"), instance_types=TYPES, regions=REGIONS,
                           count=2)
    assert result.region_errors == {}
    assert all(o.placement_score is None for o in result.offers)  # the neutral case above
    product = launch_candidates(result.offers, count=2, market_policy="spot-then-on-demand",
                                max_price=None, instance_types=TYPES, regions=REGIONS)
    assert [(o.instance_type, o.region, o.az, o.market) for o in product] == order


@pytest.mark.parametrize("k", [7, 16], ids=["across-az-type-region", "all-spot-fail"])
def test_up_falls_through_capacity_errors_in_order(spec: Path, monkeypatch, k: int) -> None:
    """K=7: fails every us-east-2 spot offer (AZ and type boundaries) and the first
    us-east-1 one (region boundary); K=16: every spot offer fails, on-demand wins."""
    order = expected_order()
    name = _name(spec)
    inject = FailRunInstances(k)
    up = _cli(monkeypatch, inject, "up", str(spec), "--yes", "--no-wait-ssh", "--timeout", "120")
    assert up.exit_code == 0, up.output

    printed, totals = _printed_attempts(up.output)
    assert printed == order[:k + 1], up.output
    assert totals == {len(order)}
    assert inject.seen == order[:k + 1]  # what reached the AWS API, call by call
    assert up.output.count("no capacity: InsufficientInstanceCapacity") == k

    itype, region, zone, market = order[k]
    assert market == ("spot" if k < 16 else "on-demand")
    nodes = _cluster_instances(name, region)
    assert len(nodes) == 2, up.output
    for node in nodes:
        assert (node["InstanceType"], node["Placement"]["AvailabilityZone"]) == (itype, zone)
        assert node.get("InstanceLifecycle") == ("spot" if market == "spot" else None)
    other = [r for r in REGIONS if r != region]
    assert all(_cluster_instances(name, r) == [] for r in other)

    _down_leaves_nothing(monkeypatch, spec, name)


def test_quota_error_stops_the_walk_at_once(spec: Path, monkeypatch) -> None:
    order = expected_order()
    name = _name(spec)
    inject = FailRunInstances(1, code="VcpuLimitExceeded")
    up = _cli(monkeypatch, inject, "up", str(spec), "--yes", "--no-wait-ssh", "--timeout", "120")
    assert up.exit_code == 1, up.output
    assert inject.seen == order[:1]
    assert _printed_attempts(up.output)[0] == order[:1]
    assert "VcpuLimitExceeded" in up.output
    assert "hint:" in up.output and "quota increase" in up.output
    assert "Traceback" not in up.output
    assert all(_cluster_instances(name, r) == [] for r in REGIONS)

    _down_leaves_nothing(monkeypatch, spec, name)


def test_spot_market_never_launches_on_demand(spec: Path, monkeypatch) -> None:
    """`nodes.market: spot`: when every spot offer fails, up fails; no on-demand attempt."""
    spec.write_text(spec.read_text().replace("market: spot-then-on-demand", "market: spot"))
    spot_only = [key for key in expected_order() if key[3] == "spot"]
    name = _name(spec)
    inject = FailRunInstances(len(spot_only))
    up = _cli(monkeypatch, inject, "up", str(spec), "--yes", "--no-wait-ssh", "--timeout", "120")
    assert up.exit_code == 1, up.output
    assert inject.seen == spot_only  # all 16 spot offers, in order, and nothing else
    printed, totals = _printed_attempts(up.output)
    assert printed == spot_only and totals == {len(spot_only)}
    assert "every launch candidate failed (16 tried)" in up.output
    assert "Traceback" not in up.output
    assert all(_cluster_instances(name, r) == [] for r in REGIONS)

    _down_leaves_nothing(monkeypatch, spec, name)
