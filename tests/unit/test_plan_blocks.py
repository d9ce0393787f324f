"""`clusterkit capacity-blocks`' pure half (plan.blocks): the duration and date options
(exit 2 before any call), the offerings cheapest first, --buy by row or id, the question
that states what is bought, the spec lines; `status`'s line on a block's end; the
command in `--help`'s Cluster stage."""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from rich.console import Console

from clusterkit.cli import help as cli_help
from clusterkit.cli.main import cli
from clusterkit.cli.status_view import render_status
from clusterkit.cluster.ops.status import StatusResult, node_row
from clusterkit.errors import UsageError
from clusterkit.plan.blocks import (
    BlockOffering,
    block_hours,
    block_type,
    cheapest_first,
    chosen,
    question,
    spec_lines,
    start_after,
)
from clusterkit.plan.nodes import BLOCK_END_TAG, CLUSTER_TAG, Node
from clusterkit.spec import loads

T0 = 1767225600.0  # 2026-01-01 00:00 UTC


def _offer(oid: str, fee: float | None, start: float = T0, az: str = "us-east-1a"):
    return BlockOffering(oid, "p5.48xlarge", az, 2, start, start + 86400, 24, fee)


def test_durations_are_whole_hours_of_a_block_and_dates_are_utc():
    assert [block_hours(t) for t in ("24h", "2d", "7d", "36h")] == [24, 48, 168, 36]
    for bad in ("90m", "0h", "183d", "24", "soon"):
        with pytest.raises(UsageError):
            block_hours(bad)
    assert start_after("2026-03-01", T0) == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert start_after("2026-03-01T11:30+01:00", T0).utcoffset() == timedelta(hours=1)
    assert start_after(None, T0) is None
    with pytest.raises(UsageError, match="not a date"):
        start_after("next tuesday", T0)


def test_a_start_in_the_past_is_refused_today_is_from_now():
    """Issue 36 item 5: a date before today, or a time already gone, exits 2; today's
    date alone means from now on."""
    noon = T0 + 12 * 3600  # 2026-01-01 12:00 UTC
    for past in ("2025-12-31", "2026-01-01T11:59", "2026-01-01T12:30+01:00"):
        with pytest.raises(UsageError, match=re.escape(f"--start-after {past} is in")) as err:
            start_after(past, noon)
        assert "2026-01-01 12:00 UTC" in err.value.message
    assert start_after("2026-01-01", noon) == datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    assert start_after("2026-01-01T12:01", noon) == datetime(2026, 1, 1, 12, 1,
                                                             tzinfo=timezone.utc)


def test_an_instance_type_aws_does_not_offer_is_refused_naming_the_closest():
    """Issue 36 item 5, as `validate` checks nodes.instance_types: a misspelt size of a
    family the catalog lists whole, or no type's form at all, exits 2 naming --type
    and the closest known types; a type the catalog does not know is a warning."""
    with pytest.raises(UsageError, match="--type p5.lrage: not an instance type AWS "
                                         "offers") as err:
        block_type("p5.lrage")
    assert err.value.hint == "did you mean p5.4xlarge or p5.48xlarge?"
    with pytest.raises(UsageError, match="not an EC2 instance type") as err:
        block_type("p4d24xlarge")
    assert err.value.hint == "did you mean p4d.24xlarge?"
    assert block_type("p5.48xlarge") is None
    assert "not in clusterkit's instance catalog" in (block_type("trn1.32xlarge") or "")


def test_the_cli_refuses_them_before_any_call():
    base = ["capacity-blocks", "--count", "2", "--duration", "24h"]
    for argv, words in ((["--type", "p5.lrage"], "did you mean p5.4xlarge or p5.48xlarge?"),
                        (["--type", "p5.48xlarge", "--start-after", "2020-01-01"],
                         "--start-after 2020-01-01 is in the past")):
        result = CliRunner().invoke(cli, [*base, *argv, "--region", "us-east-1"])
        assert result.exit_code == 2, result.output
        assert words in result.stderr


def test_offerings_cheapest_first_and_bought_by_row_or_id():
    listed = cheapest_first([_offer("cb-b", 900.0, T0 + 86400), _offer("cb-u", None),
                             _offer("cb-a", 800.0, az="us-east-1b")])
    assert [o.offering_id for o in listed] == ["cb-a", "cb-b", "cb-u"]
    assert chosen(listed, "2").offering_id == "cb-b"
    assert chosen(listed, "cb-u").offering_id == "cb-u"
    with pytest.raises(UsageError, match="the list has 3 row"):
        chosen(listed, "4")
    with pytest.raises(UsageError, match="no such offering"):
        chosen(listed, "cb-gone")


def test_the_question_states_price_type_count_az_and_dates_and_the_lines_validate():
    offer = _offer("cb-a", 2377.5)
    assert question(offer, "us-east-1") == (
        "buy capacity block cb-a: 2 x p5.48xlarge in us-east-1a, 2026-01-01 00:00 UTC to "
        "2026-01-02 00:00 UTC (24 h), 2,377.50 USD upfront in us-east-1? It is paid now "
        "and cannot be cancelled")
    lines = spec_lines("cr-0123456789abcdef0", offer, "us-east-1")
    spec = loads("name: t\n" + "\n".join(lines) + "\n")
    assert (spec.nodes.market, spec.nodes.reservation_id, spec.nodes.count) == (
        "capacity-block", "cr-0123456789abcdef0", 2)


def test_status_says_when_the_block_ends():
    node = Node("i-1", 0, "running", "p5.48xlarge", "us-east-1a", "capacity-block",
                "us-east-1", tags={CLUSTER_TAG: "b", BLOCK_END_TAG: "2099-01-02T11:30:00Z"})
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    row = node_row(node, now)
    assert row.to_json()["block_end"] == datetime(2099, 1, 2, 11, 30,
                                                  tzinfo=timezone.utc).timestamp()
    out = io.StringIO()
    render_status(Console(file=out, width=200), StatusResult("b", ["us-east-1"], [row],
                                                             0.0, 0.0))
    assert ("capacity block ends 2099-01-02 11:30 UTC (in " in out.getvalue()
            and "AWS terminates its nodes from 2099-01-02 11:00 UTC" in out.getvalue())


def test_capacity_blocks_is_a_cluster_command_and_bad_options_exit_2_before_any_call(
        monkeypatch):
    assert "capacity-blocks" in dict(cli_help.STAGES)["Cluster"]
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    result = CliRunner().invoke(cli, ["capacity-blocks", "--type", "p5.48xlarge", "--count",
                                      "2", "--duration", "90m"])
    assert result.exit_code == 2 and "a block lasts whole hours" in result.output
