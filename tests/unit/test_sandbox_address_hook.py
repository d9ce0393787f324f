"""clusterkit.remote.address.ssh_address: the one documented sandbox hook."""

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


def test_public_then_private():
    assert ssh_address(INSTANCE) == "54.1.2.3"
    assert ssh_address({"InstanceId": "i-1", "PrivateIpAddress": "10.0.0.7"}) == "10.0.0.7"


def test_no_address_is_a_clear_error():
    with pytest.raises(ClusterkitError, match="i-9"):
        ssh_address({"InstanceId": "i-9"})


def test_map_wins(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text(json.dumps({"i-0abc": "127.0.0.5"}))
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    assert ssh_address(INSTANCE) == "127.0.0.5"


def test_sandbox_mode_refuses_fake_public_ip(tmp_path, monkeypatch):
    """An instance missing from the map falls back to its (fake) public IP: refused."""
    table = tmp_path / "addresses.json"
    table.write_text("{}")
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(NetworkSafetyError, match="54.1.2.3"):
        ssh_address(INSTANCE)


def test_corrupt_map_is_reported(tmp_path, monkeypatch):
    table = tmp_path / "addresses.json"
    table.write_text("{not json")
    monkeypatch.setenv("CLUSTERKIT_ADDRESS_MAP", str(table))
    with pytest.raises(ClusterkitError, match="address map"):
        ssh_address(INSTANCE)
