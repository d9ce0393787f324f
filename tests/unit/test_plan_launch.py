"""plan/launch.py's split of a launch: a master set apart (``nodes.master.market``) is
its own RunInstances, in its market, first; the others go in one call as before."""

from __future__ import annotations

import pytest

from clusterkit.kinds import Market
from clusterkit.plan.launch import (
    authorized_keys_of,
    cloud_config,
    launch_parts,
    launch_request,
)
from clusterkit.spec import loads
from tests import support


def spec(master: str = "") -> object:
    apart = f", master: {{market: {master}}}" if master else ""
    return loads("name: t\nregion: us-east-1\n"
                 f"nodes: {{count: 4, instance_types: [c5.large], market: spot{apart}}}\n")


SPOT = support.offer("c5.large", "spot", 0.04, on_demand=0.085)


def test_the_master_set_apart_is_launched_first_in_its_market():
    [(master, first), (rest, slots)] = launch_parts(spec("on-demand"), SPOT, [0, 1, 2, 3])
    assert (first, slots) == ((0,), (1, 2, 3))
    assert (master.market, master.price, master.instance_type, master.az) == (
        Market.ON_DEMAND, 0.085, "c5.large", "us-east-1a")
    assert rest == SPOT
    request = launch_request(spec("on-demand"), master, first, "arn:stack/1")
    assert request.market == Market.ON_DEMAND and request.tags["clusterkit:price"] == "0.0850"
    assert request.client_token != launch_request(spec(), SPOT, first, "arn:stack/1").client_token


def test_a_launch_without_the_master_or_in_its_market_is_one_call():
    assert launch_parts(spec("on-demand"), SPOT, [2, 3]) == [(SPOT, (2, 3))]
    assert launch_parts(spec(), SPOT, [0, 1]) == [(SPOT, (0, 1))]
    on_demand = support.offer("c5.large", "on-demand", 0.085)
    assert launch_parts(spec("on-demand"), on_demand, [0, 1]) == [(on_demand, (0, 1))]
    [(only, slots)] = launch_parts(spec("on-demand"), SPOT, [0])  # a master replaced
    assert slots == (0,) and only.market == Market.ON_DEMAND


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0x controller@master"


def test_authorized_keys_go_in_a_cloud_config_and_read_back():
    request = launch_request(spec(), SPOT, (1,), "arn:stack/1", authorized_keys=[KEY])
    assert request.authorized_keys == (KEY,)
    text = cloud_config(request.authorized_keys)
    assert text.startswith("#cloud-config\n") and f"  - {KEY}\n" in text
    assert authorized_keys_of(text) == [KEY]
    assert authorized_keys_of("#!/bin/sh\necho hi\n") == []
    assert launch_request(spec(), SPOT, (1,), "arn:stack/1").authorized_keys == ()


def test_cloud_config_takes_public_key_lines_only():
    with pytest.raises(ValueError, match="not an OpenSSH public key"):
        cloud_config(["-----BEGIN OPENSSH PRIVATE KEY-----"])
    with pytest.raises(ValueError):
        cloud_config([KEY + "\nruncmd: [reboot]"])
