"""Reserved capacity against the emulator (moto in server mode, real HTTP). moto has no
capacity-reservation API: sandbox/clusterkit_sandbox/capacity.py emulates the calls clusterkit
makes, in AWS's response shapes, and checks RunInstances into a reservation as EC2 does
(type, AZ, room; a block not started is refused with ReservationCapacityExceeded). No
real reservation exists here: every ODCR is made with CreateCapacityReservation and
every Capacity Block is bought from the emulator's offerings. SSH waiting is off (moto's
nodes have no sshd)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from clusterkit.aws import reservations
from clusterkit.aws.instances import run_instances
from clusterkit.cli.main import cli
from clusterkit.cluster.ops.status import do_status
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.planning import do_plan
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import CapacityError, ClusterkitError, SpecError
from clusterkit.kinds import Market, ReservationKind, ReservationState
from clusterkit.plan.blocks import BLOCK_TAG
from clusterkit.plan.launch import LaunchRequest
from clusterkit.plan.nodes import BLOCK_END_TAG
from clusterkit.plan.reservation import reservation_offer
from tests.integration.conftest import AMI, REGION, Calls, leftovers, live_instances, runtime

SPEC = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [{itype}]
{market}  capacity_reservation: {reservation}
  image: {{id: {ami}}}
  placement_group: false
  root_volume: {{size_gb: 8, type: gp3}}
network: {{efa: false}}
"""


def _spec(tmp_path: Path, name: str, reservation: str, *, count: int = 2,
          itype: str = "c5.large", block: bool = False) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, count=count, itype=itype, ami=AMI,
                                reservation=reservation,
                                market="  market: capacity-block\n" if block else ""))
    return str(path)


def _ec2():
    return boto3.client("ec2", REGION)


def _odcr(itype: str = "c5.large", count: int = 2, az: str = "us-east-1b") -> str:
    return _ec2().create_capacity_reservation(
        InstanceType=itype, InstancePlatform="Linux/UNIX", AvailabilityZone=az,
        InstanceCount=count)["CapacityReservation"]["CapacityReservationId"]


def _block(starts_in: float, count: int = 1) -> str:
    """A p5.48xlarge block bought from the emulator, starting ``starts_in`` s from now."""
    ec2 = _ec2()
    offers = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=count, CapacityDurationHours=24,
        StartDateRange=datetime.now(timezone.utc) + timedelta(seconds=starts_in))
    first = offers["CapacityBlockOfferings"][0]["CapacityBlockOfferingId"]
    return ec2.purchase_capacity_block(CapacityBlockOfferingId=first,
                                       InstancePlatform="Linux/UNIX")[
        "CapacityReservation"]["CapacityReservationId"]


def _available(reservation_id: str) -> tuple[str, int]:
    held = _ec2().describe_capacity_reservations(CapacityReservationIds=[reservation_id])[
        "CapacityReservations"][0]
    return held["State"], held["AvailableInstanceCount"]


def test_the_aws_verbs_read_and_buy_reservations_as_typed_records(moto_env):
    rt = runtime()
    odcr = _odcr(count=3)
    held = reservations.describe_reservation(rt.session, REGION, odcr, 1.0)
    assert held is not None and (held.kind, held.state, held.total, held.available,
                                 held.az) == (ReservationKind.ODCR, ReservationState.ACTIVE,
                                              3, 3, "us-east-1b")
    assert held.az_id and held.read_at == 1.0
    assert reservations.describe_reservation(rt.session, REGION, "cr-0000000000000000f",
                                             0.0) is None
    offers = reservations.block_offerings(
        rt.session, REGION, instance_type="p5.48xlarge", count=2, hours=48,
        start_after=datetime.now(timezone.utc) + timedelta(hours=5))
    assert len(offers) == 2 and all(o.hours == 48 and o.count == 2 for o in offers)
    assert all(o.fee and o.currency == "USD" for o in offers)
    bought = reservations.purchase_block(rt.session, REGION, offers[1].offering_id, 2.0)
    assert (bought.kind, bought.state, bought.az, bought.total) == (
        ReservationKind.CAPACITY_BLOCK, ReservationState.SCHEDULED, offers[1].az, 2)
    assert bought.waits and bought.end == pytest.approx(offers[1].end)
    tags = _ec2().describe_capacity_reservations(CapacityReservationIds=[
        bought.reservation_id])["CapacityReservations"][0]["Tags"]
    assert tags == [{"Key": BLOCK_TAG, "Value": offers[1].offering_id}]  # from its purchase
    assert reservations.block_offerings(rt.session, REGION, instance_type="c5.large",
                                        count=1, hours=24) == []  # no blocks of c5


def test_plan_reads_the_reservation_instead_of_searching_offers(calls: Calls, tmp_path):
    odcr = _odcr(count=4)
    plan = do_plan(_spec(tmp_path, "rsplan", odcr), rt=runtime(calls))
    assert [(o.instance_type, o.az, o.market) for o in plan.candidates] == [
        ("c5.large", "us-east-1b", Market.ON_DEMAND)]
    ops = calls.by_operation()
    assert ops["DescribeCapacityReservations"] == 1
    assert "DescribeSpotPriceHistory" not in ops and "GetSpotPlacementScores" not in ops
    text = "\n".join(plan.to_json()["notes"]) + json.dumps(plan.to_json()["reservation"])
    assert '"available": 4' in text and plan.refusal is None


def test_up_launches_into_an_odcr_using_its_room_and_down_leaves_it(calls: Calls, tmp_path):
    odcr = _odcr(count=2)
    spec = _spec(tmp_path, "rsodcr", odcr)
    out = do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.by_operation()["RunInstances"] == 1
    nodes = live_instances("rsodcr")
    assert {n["Placement"]["AvailabilityZone"] for n in nodes} == {"us-east-1b"}
    assert {n.get("CapacityReservationId") for n in nodes} == {odcr}
    assert {n.market for n in out.nodes} == {"on-demand"}
    assert _available(odcr) == ("active", 0)  # the launch used the reservation's room
    do_down(spec, yes=True, rt=runtime())
    assert leftovers("rsodcr") == {}
    assert _available(odcr) == ("active", 2)  # down kept it (its instances are gone)
    assert ("ec2", "CancelCapacityReservation") not in calls.log


@pytest.mark.parametrize("case", ["too-small", "other-type", "cancelled"])
def test_up_refuses_a_reservation_that_cannot_hold_the_nodes_before_any_write(
        case: str, calls: Calls, tmp_path):
    odcr = _odcr(itype="m5.large" if case == "other-type" else "c5.large",
                 count=1 if case == "too-small" else 2)
    if case == "cancelled":
        _ec2().cancel_capacity_reservation(CapacityReservationId=odcr)
    name = f"rsno{case.replace('-', '')}"
    with pytest.raises(SpecError) as err:
        do_up(_spec(tmp_path, name, odcr), yes=True, rt=runtime(calls), wait_ssh=False)
    issue = err.value.issues[0]
    assert err.value.exit_code == 2 and issue.path == "nodes.capacity_reservation"
    assert issue.line == 6 and odcr in issue.message
    assert {"too-small": "1 of its 1 instance(s) are available, `up` launches 2",
            "other-type": "it holds m5.large, the spec wants c5.large",
            "cancelled": "it is cancelled, not active"}[case] in issue.message
    assert calls.mutating() == {} and leftovers(name) == {}


def test_a_block_not_started_is_refused_by_ec2_and_up_no_wait_exits_1(calls: Calls,
                                                                      tmp_path):
    block = _block(starts_in=3600)
    with pytest.raises(ClusterkitError) as err:
        do_up(_spec(tmp_path, "rslater", block, count=1, itype="p5.48xlarge", block=True),
              yes=True, rt=runtime(calls), wait_ssh=False, wait_start=False)
    assert err.value.exit_code == 1 and f"capacity block {block} starts at" in str(err.value)
    assert calls.mutating() == {} and leftovers("rslater") == {}
    rt = runtime()
    held = reservations.describe_reservation(rt.session, REGION, block, 0.0)
    request = LaunchRequest(reservation_offer(held), (0,), None, "ck-early", {}, {},
                            capacity_reservation=block)
    subnet = _ec2().describe_subnets()["Subnets"][0]
    template = _ec2().create_launch_template(LaunchTemplateName="rsearly", LaunchTemplateData={
        "ImageId": AMI})["LaunchTemplate"]["LaunchTemplateId"]
    with pytest.raises(CapacityError) as refused:  # as EC2 answers a launch too early
        run_instances(rt.session, REGION, request, launch_template_id=template,
                      subnet_id=subnet["SubnetId"])
    assert refused.value.code == "ReservationCapacityExceeded"


def test_up_waits_for_a_block_to_start_then_launches_into_it(calls: Calls, tmp_path):
    """The block starts 3 s after it is bought: `up` waits on the real clock (the
    emulator's states follow it), then launches with the capacity-block market."""
    block = _block(starts_in=3)
    spec = _spec(tmp_path, "rsblock", block, count=1, itype="p5.48xlarge", block=True)
    out = do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    [node] = live_instances("rsblock")
    assert node["InstanceLifecycle"] == "capacity-block"
    assert node.get("CapacityReservationId") == block
    tags = {t["Key"]: t["Value"] for t in node["Tags"]}
    end = _ec2().describe_capacity_reservations(CapacityReservationIds=[block])[
        "CapacityReservations"][0]["EndDate"]
    assert tags[BLOCK_END_TAG] == end.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert out.nodes[0].market == "capacity-block" and out.hourly_usd == 0.0
    assert _available(block) == ("active", 0)
    [row] = do_status("rsblock", rt=runtime()).nodes
    assert row.block_end == pytest.approx(end.timestamp())
    do_down(spec, yes=True, rt=runtime())
    assert leftovers("rsblock") == {} and _available(block) == ("active", 1)


def test_capacity_blocks_lists_and_buys_through_the_cli(moto_env, monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # moto directly, no sandbox daemon
    base = ["capacity-blocks", "--type", "p5.48xlarge", "--count", "2", "--duration", "2d",
            "--start-after", "2030-01-01"]
    listed = CliRunner().invoke(cli, [*base, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["offerings"]
    assert len(rows) == 2 and rows[0]["upfront_fee"] <= rows[1]["upfront_fee"]
    assert rows[0]["start"] == "2030-01-02 00:00 UTC"  # the cheaper, a day later
    asked = CliRunner().invoke(cli, [*base, "--buy", "1"])  # no terminal, no --yes
    assert asked.exit_code == 2 and "--yes" in asked.output
    bought = CliRunner().invoke(cli, [*base, "--buy", "1", "--yes"])
    assert bought.exit_code == 0, bought.output
    rid = next(w for w in bought.output.split() if w.startswith("cr-")).rstrip(":")
    assert "market: capacity-block" in bought.output
    assert f"capacity_reservation: {rid}" in bought.output
    assert _available(rid) == ("scheduled", 2)
