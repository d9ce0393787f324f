"""kinds: the closed value sets are their own text everywhere they leave the program."""

from __future__ import annotations

import json

import pytest

from clusterkit.kinds import LIVE_STATES, InstanceState, Market, MarketPolicy, Role
from clusterkit.spec.model import MARKETS


@pytest.mark.parametrize("member", [*Market, *MarketPolicy, *InstanceState, *Role])
def test_members_print_and_serialise_as_their_value(member):
    assert member == member.value
    assert str(member) == f"{member}" == format(member) == member.value
    assert f"{member:>20}" == f"{member.value:>20}"
    for indent in (None, 1):  # the C and the pure-Python encoder
        assert json.dumps({"k": member}, indent=indent) == \
            json.dumps({"k": member.value}, indent=indent)
    assert {member.value: 1}[member] == 1  # same hash as the text


def test_policies_and_their_markets():
    assert MARKETS == ("spot", "on-demand", "spot-then-on-demand", "capacity-block")
    assert MarketPolicy.CAPACITY_BLOCK.markets == (Market.CAPACITY_BLOCK,)
    assert MarketPolicy("spot").markets == (Market.SPOT,)
    assert MarketPolicy("on-demand").markets == (Market.ON_DEMAND,)
    assert MarketPolicy.SPOT_THEN_ON_DEMAND.markets == (Market.SPOT, Market.ON_DEMAND)


def test_text_read_back_from_aws_compares_equal():
    assert "stopped" in LIVE_STATES and "terminated" not in LIVE_STATES
    assert InstanceState("shutting-down") is InstanceState.SHUTTING_DOWN
