"""aws/instances.py's RunInstances parameters for a launch into a capacity reservation
(an ODCR by id, a resource group by ARN, a Capacity Block with its market type), checked
against botocore's own request model; what DescribeInstances and
DescribeCapacityReservations answer, read back. No request is sent: a stub client keeps
the arguments (the emulator's half is tests/integration/test_reserved_capacity.py)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from clusterkit.aws import instances, reservations
from clusterkit.aws.reservations import to_reservation
from clusterkit.kinds import Market, ReservationKind, ReservationState
from clusterkit.plan.blocks import BLOCK_TAG
from clusterkit.plan.launch import LaunchRequest
from tests import support

GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/odcrs"


def _model_errors(operation: str, params: dict) -> str:
    model = botocore.session.get_session().get_service_model("ec2")
    report = ParamValidator().validate(params, model.operation_model(operation).input_shape)
    return report.generate_report() if report.has_errors() else ""


class _Stub:
    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}

    def run_instances(self, **kwargs: Any) -> dict:
        self.kwargs = kwargs
        return {"Instances": []}


def _launch(monkeypatch: pytest.MonkeyPatch, market: str, target: str | None) -> dict:
    stub = _Stub()
    monkeypatch.setattr(instances, "_ec2", lambda *_: stub)
    offer = support.offer("p5.48xlarge", market, 0.0, az="us-east-1a")
    request = LaunchRequest(offer, (0, 1), None, "ck-token", {"clusterkit:cluster": "c"},
                            {"clusterkit:cluster": "c"}, capacity_reservation=target)
    instances.run_instances(None, "us-east-1", request, launch_template_id="lt-1",
                            subnet_id="subnet-1", security_group="sg-1")
    assert _model_errors("RunInstances", stub.kwargs) == ""
    return stub.kwargs


def test_a_block_launch_names_the_reservation_and_the_capacity_block_market(monkeypatch):
    kwargs = _launch(monkeypatch, Market.CAPACITY_BLOCK, "cr-0123456789abcdef0")
    assert kwargs["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}
    assert kwargs["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert not any(t["ResourceType"] == "spot-instances-request"
                   for t in kwargs["TagSpecifications"])


def test_an_odcr_launch_is_on_demand_and_a_group_is_targeted_by_arn(monkeypatch):
    odcr = _launch(monkeypatch, Market.ON_DEMAND, "cr-0123456789abcdef0")
    assert "InstanceMarketOptions" not in odcr
    assert odcr["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0123456789abcdef0"}
    group = _launch(monkeypatch, Market.ON_DEMAND, GROUP)
    assert group["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationResourceGroupArn": GROUP}
    plain = _launch(monkeypatch, Market.ON_DEMAND, None)
    assert "CapacityReservationSpecification" not in plain


def test_a_node_in_a_block_reads_back_as_the_capacity_block_market():
    raw = {"InstanceId": "i-1", "InstanceLifecycle": "capacity-block", "State": {"Name":
           "running"}, "InstanceType": "p5.48xlarge", "Placement": {"AvailabilityZone":
           "us-east-1a"}}
    assert instances.to_node(raw, "us-east-1").market == Market.CAPACITY_BLOCK
    assert instances.to_node({**raw, "InstanceLifecycle": "spot"}, "us-east-1").market == \
        Market.SPOT
    del raw["InstanceLifecycle"]
    assert instances.to_node(raw, "us-east-1").market == Market.ON_DEMAND


def test_a_described_reservation_becomes_the_typed_record():
    start = datetime(2026, 1, 1, 11, 30, tzinfo=timezone.utc)
    raw = {"CapacityReservationId": "cr-1", "InstanceType": "p5.48xlarge",
           "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az6",
           "TotalInstanceCount": 2, "AvailableInstanceCount": 1, "State": "scheduled",
           "ReservationType": "capacity-block", "InstancePlatform": "Linux/UNIX",
           "Tenancy": "default", "StartDate": start, "EndDate": start}
    held = to_reservation(raw, "us-east-1", 5.0)
    assert (held.kind, held.state, held.available, held.start, held.read_at) == (
        ReservationKind.CAPACITY_BLOCK, ReservationState.SCHEDULED, 1, start.timestamp(), 5.0)
    assert held.waits
    odd = to_reservation({**raw, "State": "some-new-state", "ReservationType": "default"},
                         "us-east-1", 0.0)
    assert odd.state is ReservationState.UNAVAILABLE and odd.kind is ReservationKind.ODCR


def test_the_purchase_and_offering_requests_fit_botocores_model(monkeypatch):
    assert _model_errors("DescribeCapacityBlockOfferings", {
        "InstanceType": "p5.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 24,
        "StartDateRange": datetime(2026, 3, 1, tzinfo=timezone.utc)}) == ""
    sent: dict[str, Any] = {}
    start = datetime(2026, 3, 1, tzinfo=timezone.utc)

    class Ec2:
        def purchase_capacity_block(self, **kwargs: Any) -> dict:
            sent.update(kwargs)
            return {"CapacityReservation": {
                "CapacityReservationId": "cr-1", "InstanceType": "p5.48xlarge",
                "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 1,
                "AvailableInstanceCount": 1, "State": "scheduled",
                "ReservationType": "capacity-block", "StartDate": start, "EndDate": start}}

    monkeypatch.setattr(reservations, "_ec2", lambda *_: Ec2())
    bought = reservations.purchase_block(None, "us-east-1", "cb-0123456789abcdef0", 1.0)
    assert bought.reservation_id == "cr-1"
    assert _model_errors("PurchaseCapacityBlock", sent) == ""
    # tagged from its purchase on: the user's policy buys no untagged block
    assert sent == {"CapacityBlockOfferingId": "cb-0123456789abcdef0",
                    "InstancePlatform": "Linux/UNIX", "TagSpecifications": [{
                        "ResourceType": "capacity-reservation",
                        "Tags": [{"Key": BLOCK_TAG, "Value": "cb-0123456789abcdef0"}]}]}
    assert _model_errors("DescribeCapacityReservations", {
        "CapacityReservationIds": ["cr-0123456789abcdef0"]}) == ""
