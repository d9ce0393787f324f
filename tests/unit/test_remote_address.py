"""ssh_address(..., via_gateway=True): the address the master dials for a node."""

from __future__ import annotations

import json

import pytest

from clusterkit.errors import ClusterkitError, NetworkSafetyError
from clusterkit.remote.address import ssh_address

INSTANCE = {"InstanceId": "i-0abc", "PublicIpAddress": "54.1.2.3",
            "PrivateIpAddress": "10.0.0.12"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    monkeypatch.delenv("CLUSTERKIT_ADDRESS_MAP", raising=False)


def test_via_gateway_is_the_private_ip_never_the_public_one():
    assert ssh_address(INSTANCE, via_gateway=True) == "10.0.0.12"
    assert ssh_address(INSTANCE) == "54.1.2.3"
    with pytest.raises(ClusterkitError, match="i-1"):
        ssh_address({"InstanceId": "i-1", "PublicIpAddress": "54.1.2.4"}, via_gateway=True)


def test_via_gateway_map_wins_and_guard_applies(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text(json.dumps({"i-0abc": "127.0.0.5"}))
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    assert ssh_address(INSTANCE, via_gateway=True) == "127.0.0.5"
    table.write_text("{}")  # not in the map: the fake private IP is refused, not dialled
    with pytest.raises(NetworkSafetyError):
        ssh_address(INSTANCE, via_gateway=True)
