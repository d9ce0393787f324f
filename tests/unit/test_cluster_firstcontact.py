"""First contact (cluster.firstcontact through cluster.hostkeys.check_and_record): a new
node's key is pinned when its instance's console shows it; refused, naming node,
instance and both fingerprints, and pinned for no one, when the console shows other
keys; trusted on first use with one warning when the console shows none (the image
prints none, AWS posted nothing within the wait, or GetConsoleOutput failed). Real
keys from ssh-keygen; each console is given as text."""

from __future__ import annotations

import pytest

from clusterkit import statedir
from clusterkit.cluster.access import firstcontact, hostkeys
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, RemoteError
from clusterkit.events import Collect, Kind
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.remote import known_hosts
from clusterkit.sandbox import console as sandbox_console
from tests import support

FINISHED = "Cloud-init v. 23.4 finished at Thu, 26 Nov 2026 07:00:02 +0000.\n"


def node(iid: str, index: int) -> Node:
    return Node(iid, index, "running", "c5.large", "us-east-1a", "on-demand", "us-east-1",
                public_ip=f"127.0.0.{index + 2}", private_ip=f"127.0.1.{index + 2}",
                tags=wanted_tags("fc", index))


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv(statedir.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv("CLUSTERKIT_ADDRESS_MAP", raising=False)
    keys = {n: support.public_key(support.ssh_keygen(tmp_path / n)) for n in "abc"}
    return Runtime(session=None, report=Collect(), poll=0.0), keys


def test_keys_their_console_shows_are_pinned(env):
    rt, keys = env
    nodes = [node("i-0", 0), node("i-1", 1)]
    shown = {"i-0": keys["a"], "i-1": keys["b"]}
    hostkeys.check_and_record(rt, "fc", nodes, shown,
                              console=lambda n: sandbox_console.console_text(
                                  shown[n.instance_id], "h"))
    assert known_hosts.instance_keys("fc") == shown
    assert rt.report.texts(Kind.WARNING) == []  # type: ignore[attr-defined]
    assert any("2 new host key(s) match" in t for t in rt.report.texts(Kind.INFO))  # type: ignore[attr-defined]


def test_a_key_the_console_does_not_show_is_refused_and_pinned_for_no_one(env):
    rt, keys = env
    nodes = [node("i-0", 0), node("i-1", 1)]
    printed = {"i-0": keys["a"], "i-1": keys["c"]}  # i-1's console shows another key
    with pytest.raises(RemoteError) as caught:
        hostkeys.check_and_record(rt, "fc", nodes, {"i-0": keys["a"], "i-1": keys["b"]},
                                  console=lambda n: sandbox_console.console_text(
                                      printed[n.instance_id], "h"))
    message, hint = caught.value.message, caught.value.hint or ""
    assert "fc-worker-1 (i-1)" in message and "fc-master" not in message
    assert known_hosts.fingerprint(keys["b"]) in message  # what the address presented
    assert known_hosts.fingerprint(keys["c"]) in message  # what the instance printed
    assert "may not reach that instance" in hint
    assert known_hosts.instance_keys("fc") == {"i-0": keys["a"]}  # nothing for i-1
    known = known_hosts.known_hosts_path("fc").read_text()
    assert "127.0.0.3" not in known and keys["b"] not in known
    assert caught.value.exit_code == 1


def test_unprinted_keys_are_trusted_on_first_use_once(env):
    rt, keys = env
    nodes = [node("i-0", 0), node("i-1", 1)]
    presented = {"i-0": keys["a"], "i-1": keys["b"]}
    hostkeys.check_and_record(rt, "fc", nodes, presented, console=lambda n: FINISHED)
    warned = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert len(warned) == 2
    assert all("trusting its host key" in w and "on first use" in w for w in warned)
    assert "fc-master-0 (i-0)" in warned[0] and known_hosts.fingerprint(keys["a"]) in warned[0]
    assert "the image prints none" in warned[0]
    assert known_hosts.instance_keys("fc") == presented
    hostkeys.check_and_record(rt, "fc", nodes, presented, console=lambda n: FINISHED)
    assert len(rt.report.texts(Kind.WARNING)) == 2  # type: ignore[attr-defined]  # pinned now: no new warning


def test_the_wait_for_a_console_is_bounded_and_rereads(env):
    rt, keys = env
    reads: list[str] = []
    ticks = iter(range(1000))
    rt.clock = lambda: float(next(ticks))

    def late(n: Node) -> str:
        reads.append(n.instance_id)  # i-0 prints on its third read; i-1 never does
        if n.instance_id == "i-0" and reads.count("i-0") >= 3:
            return sandbox_console.console_text(keys["a"], "h")
        return ""

    refused = firstcontact.verify(rt, [node("i-0", 0), node("i-1", 1)],
                                  {"i-0": keys["a"], "i-1": keys["b"]},
                                  {"i-0": "m", "i-1": "w"}, late, wait=5.0)
    assert refused == []
    assert reads.count("i-0") == 3 and 3 < reads.count("i-1") <= 6
    (warned,) = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert warned.startswith("w (i-1): its console showed no SSH host keys within 5 s")


def test_an_aws_error_is_a_warning_not_a_pass(env):
    rt, keys = env

    def denied(n: Node) -> str:
        raise AwsError("GetConsoleOutput on i-0 failed: UnauthorizedOperation: no", "hint")

    refused = firstcontact.verify(rt, [node("i-0", 0)], {"i-0": keys["a"]}, {}, denied)
    assert refused == []
    (warned,) = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert "GetConsoleOutput failed" in warned and "UnauthorizedOperation" in warned
    assert "on first use" in warned


def test_pinned_nodes_are_not_read_again(env):
    rt, keys = env
    nodes = [node("i-0", 0)]
    known_hosts.record_instances("fc", {"i-0": keys["a"]})

    def never(n: Node) -> str:
        raise AssertionError("a pinned node's console was read")

    hostkeys.check_and_record(rt, "fc", nodes, {"i-0": keys["a"]}, console=never)
    assert known_hosts.instance_keys("fc") == {"i-0": keys["a"]}
