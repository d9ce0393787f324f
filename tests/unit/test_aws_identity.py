"""aws.identity: the caller's address for the SSH rule. The override and its errors;
the HTTPS lookup itself is refused in sandbox mode before any packet leaves."""

from __future__ import annotations

import pytest

from clusterkit.aws.identity import OVERRIDE_ENV, caller_cidr
from clusterkit.errors import NetworkSafetyError, UsageError


@pytest.mark.parametrize(("given", "cidr"), [
    ("203.0.113.7", "203.0.113.7/32"), ("203.0.113.7/32", "203.0.113.7/32"),
    (" 198.51.100.0/24\n", "198.51.100.0/24"), ("198.51.100.9/24", "198.51.100.0/24"),
])
def test_override(monkeypatch, given, cidr):
    monkeypatch.setenv(OVERRIDE_ENV, given)
    assert caller_cidr() == cidr


def test_bad_override_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(OVERRIDE_ENV, "my laptop")
    with pytest.raises(UsageError) as caught:
        caller_cidr()
    assert OVERRIDE_ENV in caught.value.message
    assert caught.value.exit_code == 2


def test_lookup_refused_in_sandbox_mode(monkeypatch):
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(NetworkSafetyError, match="checkip.amazonaws.com"):
        caller_cidr()
