"""node/imdsfence.py: the rule's command line (only of checked values) and the proxy's
path filter (a role's credentials refused under any spelling the metadata would read as
them; the watcher's paths answered)."""

from __future__ import annotations

import pytest

from clusterkit.node import imdsfence
from clusterkit.node.imdsfence import Action, FenceError


def test_the_rule_sends_everyone_but_the_controller_and_root_to_the_proxy():
    assert imdsfence.rule_argv(Action.ADD, "127.0.0.1") == [
        "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp",
        "-d", "169.254.169.254/32", "--dport", "80",
        "-m", "owner", "!", "--uid-owner", "clusterkit-ctl",
        "-m", "owner", "!", "--uid-owner", "0",
        "-j", "DNAT", "--to-destination", "127.0.0.1:8911"]


@pytest.mark.parametrize("action, word", [(Action.ADD, "-A"), (Action.DELETE, "-D"),
                                          (Action.CHECK, "-C")])
def test_each_action_is_the_same_rule(action, word):
    argv = imdsfence.rule_argv(action, "127.3.0.7", 9000)
    assert argv[4] == word
    assert argv[5:] == imdsfence.rule_argv(Action.ADD, "127.3.0.7", 9000)[5:]
    assert argv[-1] == "127.3.0.7:9000"


@pytest.mark.parametrize("address, port, user, why", [
    ("10.0.0.5", 8911, "clusterkit-ctl", "loopback"),
    ("169.254.169.254", 8911, "clusterkit-ctl", "loopback"),
    ("127.0.0.1 -j ACCEPT", 8911, "clusterkit-ctl", "IPv4"),
    ("::1", 8911, "clusterkit-ctl", "IPv4"),
    ("127.0.0.1", 0, "clusterkit-ctl", "port"),
    ("127.0.0.1", 65536, "clusterkit-ctl", "port"),
    ("127.0.0.1", True, "clusterkit-ctl", "port"),
    ("127.0.0.1", "8911", "clusterkit-ctl", "port"),
    ("127.0.0.1", 8911, "root", "system user"),
    ("127.0.0.1", 8911, "ctl ! --uid-owner 1000", "system user"),
    ("127.0.0.1", 8911, "-j", "system user"),
    ("127.0.0.1", 8911, "", "system user"),
    ("127.0.0.1", 8911, "a" * 33, "system user"),
])
def test_a_value_the_rule_cannot_hold_is_refused(address, port, user, why):
    with pytest.raises(FenceError, match=why):
        imdsfence.rule_argv(Action.ADD, address, port, user)


@pytest.mark.parametrize("method, path, refused", [
    # the role's credentials, under any version and spelling the metadata reads as them
    ("GET", "/latest/meta-data/iam/security-credentials/", True),
    ("GET", "/latest/meta-data/iam/security-credentials", True),
    ("GET", "/latest/meta-data/iam/security-credentials/ControllerRole", True),
    ("GET", "/2021-07-15/meta-data/iam/security-credentials/ControllerRole", True),
    ("GET", "/latest/meta-data/IAM/Security-Credentials/ControllerRole", True),
    ("GET", "/latest/meta-data/identity-credentials/ec2/security-credentials/ec2-instance",
     True),
    ("GET", "/latest/meta-data/identity-credentials", True),
    # what could read as them another way: refused, not parsed
    ("GET", "/latest/meta-data/iam/../iam/security-credentials/", True),
    ("GET", "/latest/meta-data//iam/security-credentials/", True),
    ("GET", "/latest/meta-data/./iam/security-credentials/", True),
    ("GET", "/latest/meta-data/iam/security%2Dcredentials/", True),
    ("GET", "/latest/meta-data/iam/security-credentials?x", True),
    ("GET", "latest/meta-data/instance-id", True),
    ("GET", "/latest/meta-data/..", True),
    # methods IMDSv2 does not take, a PUT that is not the token's
    ("POST", "/latest/api/token", True),
    ("DELETE", "/latest/meta-data/instance-id", True),
    ("PUT", "/latest/meta-data/instance-id", True),
    # what the master's watcher and tools read
    ("PUT", "/latest/api/token", False),
    ("GET", "/latest/meta-data/instance-id", False),
    ("GET", "/latest/meta-data/spot/instance-action", False),
    ("GET", "/latest/meta-data/events/recommendations/rebalance", False),
    ("GET", "/latest/dynamic/instance-identity/document", False),
    ("GET", "/latest/meta-data/placement/availability-zone", False),
    ("GET", "/latest/meta-data/iam/info", False),
    ("GET", "/latest/meta-data/iam/", False),
    ("GET", "/latest/meta-data/", False),
    ("GET", "/", False),
])
def test_the_proxy_refuses_the_credentials_only(method, path, refused):
    assert imdsfence.refused(method, path) is refused
