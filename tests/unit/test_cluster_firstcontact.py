"""First contact (cluster.firstcontact through cluster.hostkeys.check_and_record): a new
node's key is pinned when its instance's console shows it; refused, naming node,
instance and both fingerprints, and pinned for no one, when the console shows other
keys (accepted or not); refused too, exit 1, naming node, instance, why and
`--accept-new-host-key NODE`, when the console shows none (the image prints none, AWS
posted nothing within the wait, or GetConsoleOutput failed), unless that node is
accepted: then pinned with one warning. Real keys from ssh-keygen; each console is
given as text."""

from __future__ import annotations

import pytest

from clusterkit import statedir
from clusterkit.cluster.access import firstcontact, hostkeys
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, RemoteError
from clusterkit.events import Collect, Kind
from clusterkit.plan.nodes import Node, wanted_tags
from clusterkit.remote import known_hosts
from clusterkit_sandbox import console as sandbox_console
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


def test_unprinted_keys_are_refused_and_pinned_for_no_one(env):
    rt, keys = env
    nodes = [node("i-0", 0), node("i-1", 1)]
    printed = {"i-0": sandbox_console.console_text(keys["a"], "h"), "i-1": FINISHED}
    with pytest.raises(RemoteError) as caught:
        hostkeys.check_and_record(rt, "fc", nodes, {"i-0": keys["a"], "i-1": keys["b"]},
                                  console=lambda n: printed[n.instance_id])
    message, hint = caught.value.message, caught.value.hint or ""
    assert caught.value.exit_code == 1
    assert "fc-worker-1 (i-1): its console shows no SSH host keys (the image prints none)" \
        in message and "fc-master" not in message
    assert known_hosts.fingerprint(keys["b"]) in message
    assert "`--accept-new-host-key fc-worker-1`" in message
    assert "trusts no host key on first use" in hint
    assert rt.report.texts(Kind.WARNING) == []  # type: ignore[attr-defined]
    assert any("1 new host key(s) match" in t for t in rt.report.texts(Kind.INFO))  # type: ignore[attr-defined]
    assert known_hosts.instance_keys("fc") == {"i-0": keys["a"]}  # nothing for i-1
    assert keys["b"] not in known_hosts.known_hosts_path("fc").read_text()


def test_an_accepted_node_without_printed_keys_is_pinned_with_one_warning(env):
    rt, keys = env
    nodes = [node("i-0", 0), node("i-1", 1)]
    presented = {"i-0": keys["a"], "i-1": keys["b"]}
    hostkeys.check_and_record(rt, "fc", nodes, presented, console=lambda n: FINISHED,
                              accept=["master", "fc-worker-1"])
    warned = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert len(warned) == 2
    assert all("unchecked, as --accept-new-host-key asks" in w for w in warned)
    assert "fc-master-0 (i-0)" in warned[0] and known_hosts.fingerprint(keys["a"]) in warned[0]
    assert "the image prints none" in warned[0]
    assert known_hosts.instance_keys("fc") == presented
    hostkeys.check_and_record(rt, "fc", nodes, presented, console=lambda n: FINISHED)
    assert len(rt.report.texts(Kind.WARNING)) == 2  # type: ignore[attr-defined]  # pinned now: no new warning


def test_accepting_does_not_pin_a_key_the_console_contradicts(env):
    rt, keys = env
    nodes = [node("i-0", 0)]
    with pytest.raises(RemoteError) as caught:
        hostkeys.check_and_record(rt, "fc", nodes, {"i-0": keys["a"]}, accept=["0"],
                                  console=lambda n: sandbox_console.console_text(keys["c"], "h"))
    assert "does not match the one the instance printed" in caught.value.message
    assert known_hosts.instance_keys("fc") == {}


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
    assert reads.count("i-0") == 3 and 3 < reads.count("i-1") <= 6
    assert [(r.label, r.instance_id) for r in refused] == [("w", "i-1")]
    assert refused[0].describe().startswith("w (i-1): its console showed no SSH host keys "
                                            "within 5 s")
    assert rt.report.texts(Kind.WARNING) == []  # type: ignore[attr-defined]


def _denied(n: Node) -> str:
    raise AwsError("GetConsoleOutput on i-0 failed: UnauthorizedOperation: no", "hint")


def test_an_aws_error_is_a_refusal_not_a_pass(env):
    rt, keys = env
    refused = firstcontact.verify(rt, [node("i-0", 0)], {"i-0": keys["a"]}, {}, _denied)
    (why,) = [r.describe() for r in refused]
    assert why.startswith("i-0 (i-0): GetConsoleOutput failed:") and "UnauthorizedOperation" in why
    error = firstcontact.refusal_error(refused)
    assert error.exit_code == 1 and "--accept-new-host-key i-0" in error.message
    assert rt.report.texts(Kind.WARNING) == []  # type: ignore[attr-defined]


def test_an_aws_error_on_an_accepted_node_pins_it_with_a_warning(env):
    rt, keys = env
    refused = firstcontact.verify(rt, [node("i-0", 0)], {"i-0": keys["a"]}, {"i-0": "m"},
                                  _denied, accepted={"i-0"})
    assert refused == []
    (warned,) = rt.report.texts(Kind.WARNING)  # type: ignore[attr-defined]
    assert warned.startswith("m (i-0): GetConsoleOutput failed:")
    assert known_hosts.fingerprint(keys["a"]) in warned and "--accept-new-host-key" in warned


def test_a_mismatch_is_named_before_a_console_without_keys(env):
    rt, keys = env
    printed = {"i-0": sandbox_console.console_text(keys["c"], "h"), "i-1": ""}
    refused = firstcontact.verify(rt, [node("i-0", 0), node("i-1", 1)],
                                  {"i-0": keys["a"], "i-1": keys["b"]}, {},
                                  lambda n: printed[n.instance_id], wait=0.0)
    assert [r.instance_id for r in refused] == ["i-0", "i-1"]
    message = firstcontact.refusal_error(refused).message
    assert "does not match" in message and "i-1" not in message


def test_pinned_nodes_are_not_read_again(env):
    rt, keys = env
    nodes = [node("i-0", 0)]
    known_hosts.record_instances("fc", {"i-0": keys["a"]})

    def never(n: Node) -> str:
        raise AssertionError("a pinned node's console was read")

    hostkeys.check_and_record(rt, "fc", nodes, {"i-0": keys["a"]}, console=never)
    assert known_hosts.instance_keys("fc") == {"i-0": keys["a"]}
