"""plan.reservation: a reservation's facts in, `up`'s refusal (located at the spec's
nodes.capacity_reservation) or the plan's lines out, as data (plan_reservation_cases/);
and the plan made on a reservation: its one candidate, the launch request, the saved
plan's round trip. No reservation is read here (the emulator's half is
tests/integration/test_reserved_capacity.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from clusterkit.kinds import Market, ReservationKind, ReservationState
from clusterkit.plan.launch import launch_request
from clusterkit.plan.nodes import BLOCK_END_TAG, Node, wanted_tags
from clusterkit.plan.reservation import Reservation, refusal, reservation_lines
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import plan_up
from clusterkit.plan.world import Observed, differences
from clusterkit.spec import loads
from tests import support

CASES = sorted((Path(__file__).parent / "plan_reservation_cases").glob("*.json"))
T0 = 1767225600.0  # 2026-01-01 00:00 UTC


def _spec(nodes: dict, reservation: str = "cr-0123456789abcdef0"):
    text = yaml.safe_dump({"name": "t", "region": "us-east-1",
                           "nodes": {**nodes, "capacity_reservation": reservation}},
                          sort_keys=False)
    return loads(text, "cluster.yaml"), text


def _live(spec, rows: list[dict]) -> list[Node]:
    return [Node(f"i-{r['index']}", r["index"], "running", r["type"], r["az"],
                 Market.ON_DEMAND, "us-east-1", tags=wanted_tags(spec.name, r["index"]))
            for r in rows]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_reservation_case(path: Path) -> None:
    case = json.loads(path.read_text())
    spec, text = _spec(case["nodes"])
    held = Reservation.from_json(case["reservation"])
    issue = refusal(spec, held, case["launch"], _live(spec, case.get("live", [])))
    if case["refused"] is None:
        assert issue is None, issue
    else:
        assert issue is not None and case["refused"] in issue.message, issue
        assert case["hint"] in (issue.hint or ""), issue.hint
        line = next(i for i, t in enumerate(text.splitlines(), 1) if "capacity_reservation" in t)
        assert (issue.file, issue.line, issue.path) == ("cluster.yaml", line,
                                                        "nodes.capacity_reservation")
        assert held.reservation_id in issue.message
    shown = "\n".join(reservation_lines(held))
    for expected in case["lines"]:
        assert expected in shown, shown


def _block(**kw) -> Reservation:
    values = {"reservation_id": "cr-0123456789abcdef0", "region": "us-east-1",
              "instance_type": "p5.48xlarge", "az": "us-east-1b", "az_id": "use1-az2",
              "total": 2, "available": 2, "state": ReservationState.ACTIVE,
              "kind": ReservationKind.CAPACITY_BLOCK, "start": T0 - 3600,
              "end": T0 + 86400, "read_at": T0}
    return Reservation(**{**values, **kw})


BLOCK_SPEC = {"count": 2, "instance_types": ["p5.48xlarge"], "market": "capacity-block"}


def test_a_plan_on_a_block_launches_into_it_and_says_so() -> None:
    """The reservation decides type and AZ (the offers searched are not used); the
    block's nodes cost nothing per hour; the lines and JSON name the reservation."""
    spec, _ = _spec(BLOCK_SPEC)
    spot = support.offer("p5.48xlarge", "spot", 20.0, az="us-east-1a", gpus=8)
    seen = replace(support.observed(spec, offers=[spot]), reservation=_block())
    plan = plan_up(spec, seen)
    assert [(o.instance_type, o.az, o.market, o.price) for o in plan.candidates] == [
        ("p5.48xlarge", "us-east-1b", Market.CAPACITY_BLOCK, 0.0)]
    assert plan.refusal is None and plan.hourly_after() == 0.0
    text = "\n".join(plan_lines(plan))
    assert "capacity-block, in us-east-1b" in text
    assert "capacity block cr-0123456789abcdef0: 2 x p5.48xlarge in us-east-1b" in text
    assert plan.to_json()["reservation"]["kind"] == "capacity-block"


def test_the_launch_request_targets_the_reservation_and_tags_the_block_end() -> None:
    spec, _ = _spec(BLOCK_SPEC)
    plan = plan_up(spec, replace(support.observed(spec), reservation=_block()))
    request = launch_request(spec, plan.candidates[0], (0, 1), "stack-1")
    assert request.capacity_reservation == "cr-0123456789abcdef0"
    assert request.market == Market.CAPACITY_BLOCK
    assert request.tags[BLOCK_END_TAG] == "2026-01-02T00:00:00Z"
    node = Node("i-1", 0, "running", "p5.48xlarge", "us-east-1b", Market.CAPACITY_BLOCK,
                "us-east-1", tags=dict(request.tags))
    assert node.block_end == T0 + 86400
    odcr, _ = _spec({"count": 1, "instance_types": ["p4d.24xlarge"]})
    assert odcr.nodes.market == "on-demand"  # an ODCR's nodes: on-demand, unless written
    plain = launch_request(odcr, support.offer("p4d.24xlarge", "on-demand", 32.0), (0,), "s")
    assert BLOCK_END_TAG not in plain.tags


def test_a_refused_reservation_is_a_plan_line_and_the_plan_keeps_it() -> None:
    spec, _ = _spec({**BLOCK_SPEC, "count": 3})
    plan = plan_up(spec, replace(support.observed(spec), reservation=_block()))
    assert plan.refusal is not None and "2 of its 2 instance(s)" in plan.refusal.message
    assert any(line.startswith("`up` refuses this: cluster.yaml:")
               for line in plan_lines(plan))


def test_a_resource_group_is_not_read_and_the_plan_says_what_ec2_does() -> None:
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/odcrs"
    spec, _ = _spec({"count": 1, "instance_types": ["p4d.24xlarge"]}, arn)
    offer = support.offer("p4d.24xlarge", "on-demand", 32.77, gpus=8)
    plan = plan_up(spec, support.observed(spec, candidates=[offer]))
    assert plan.reservation is None and plan.refusal is None
    assert any("reservations of the group" in line for line in plan_lines(plan))
    assert launch_request(spec, offer, (0,), "s").capacity_reservation == arn


def test_a_saved_plan_keeps_the_reservation_and_sees_it_change() -> None:
    spec, _ = _spec(BLOCK_SPEC)
    seen = replace(support.observed(spec), subnets={"us-east-1b": "subnet-1"},
                   reservation=_block(state=ReservationState.SCHEDULED, start=T0 + 60))
    back = Observed.from_json(json.loads(json.dumps(seen.to_json())))
    assert back.reservation == seen.reservation
    started = replace(back, reservation=replace(back.reservation, state=ReservationState.ACTIVE,
                                                read_at=T0 + 120))
    assert differences(seen, started) == []  # the start the plan waited for
    taken = replace(started, reservation=replace(started.reservation, available=1))
    assert differences(seen, taken) == ["cr-0123456789abcdef0 available was 2, is now 1"]
