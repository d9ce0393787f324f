"""The autostop rules (clusterkit/node/autostop_policy.py): durations, the config, what counts
as activity, the master's clock and decision, the signed messages. Times are given, never
read: each test says what happens in which order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusterkit.node import autostop_policy as policy
from clusterkit.node import link
from clusterkit.node.autostop_policy import Clock, Config

TOKEN = "t" * 64
CFG = Config(cluster="demo", node=0, nodes=3, master="127.0.0.2", idle_s=20, token=TOKEN)


@pytest.mark.parametrize(("text", "seconds"), [
    ("20s", 20), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1d", 86400),
    ("1d2h3m4s", 93784), (" 10s ", 10)])
def test_durations(text: str, seconds: int) -> None:
    assert policy.parse_duration(text) == seconds
    assert policy.parse_duration(policy.format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "30", "m", "30x", "1.5h", "-5m", "30m1h", "off"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        policy.parse_duration(text)


@pytest.mark.parametrize("text", ["9s", "0s", "31d"])
def test_out_of_range(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        policy.parse_duration(text)
    assert policy.duration_seconds(text) >= 0  # the form is fine


def test_config_round_trips_and_refuses_bad_values() -> None:
    assert policy.config_from(CFG.to_dict()) == CFG
    assert TOKEN not in repr(CFG)
    for key, bad in (("action", "halt"), ("idle_s", 5), ("node", 3), ("token", "short"),
                     ("port", 0), ("master", "a b"), ("version", 2)):
        with pytest.raises(ValueError):
            policy.config_from({**CFG.to_dict(), key: bad})
    with pytest.raises(ValueError):
        policy.config_from({**CFG.to_dict(), "idle_s": None})


@pytest.mark.parametrize(("cmdline", "tty"), [
    ("sshd: ubuntu@pts/0", "ubuntu@pts/0"), ("sshd: root@pts/12\0\0", "root@pts/12"),
    ("sshd-session: ubuntu@pts/3", "ubuntu@pts/3"), ("sshd: ubuntu@notty", None),
    ("sshd: ubuntu [priv]", None), ("/usr/sbin/sshd -D", None), ("bash", None)])
def test_session_tty(cmdline: str, tty: str | None) -> None:
    assert policy.session_tty(cmdline) == tty


def test_activity_counts_live_jobs_and_terminal_sessions_only() -> None:
    jobs = [("j-2", "running", True), ("j-1", "running", False), ("j-3", "succeeded", True),
            ("j-4", "stopping", True)]
    assert policy.activity(jobs, ["ubuntu@pts/1"]) == [
        "job j-2 running", "job j-4 stopping", "ssh session ubuntu@pts/1"]
    assert policy.activity([("j-1", "starting", False)], []) == []


def test_activity_resets_the_clock_and_idleness_decides() -> None:
    clock = Clock(last_activity=100.0)
    clock = policy.decide(policy.observe(clock, 110.0, ["job j-1 running"]), CFG, 110.0)
    assert clock.last_activity == 110.0 and clock.decided is None
    assert policy.time_left(clock, CFG, 125.0) == 5.0
    clock = policy.decide(policy.observe(clock, 129.9, []), CFG, 129.9)
    assert clock.decided is None
    clock = policy.decide(policy.observe(clock, 130.0, []), CFG, 130.0)
    assert clock.decided == 130.0 and policy.time_left(clock, CFG, 130.0) == 0.0
    # once decided, activity comes too late: the decision stands
    late = policy.observe(clock, 131.0, ["ssh session ubuntu@pts/0"], node=2)
    assert late.decided == 130.0 and late.last_activity == 110.0 and late.seen == {2: 131.0}


def test_a_workers_activity_is_named_in_the_reason() -> None:
    clock = policy.observe(Clock(last_activity=0.0), 5.0, ["ssh session root@pts/0"], node=1)
    assert clock.reason == "worker-1: ssh session root@pts/0" and clock.last_activity == 5.0


def test_the_master_goes_after_every_worker_was_told_or_after_the_grace() -> None:
    clock = Clock(last_activity=0.0, decided=20.0)
    assert not policy.master_may_go(Clock(last_activity=0.0), CFG, 1e9)
    assert not policy.master_may_go(policy.tell(clock, 1, 21.0), CFG, 30.0)
    both = policy.tell(policy.tell(clock, 1, 21.0), 2, 22.0)
    assert policy.tell(both, 2, 29.0) == both  # told once: the drain is not pushed back
    assert not policy.master_may_go(both, CFG, 22.0 + policy.DRAIN_S - 0.1)
    assert policy.master_may_go(both, CFG, 22.0 + policy.DRAIN_S)
    grace = 2 * CFG.poll_s + policy.TELL_GRACE_S
    assert not policy.master_may_go(clock, CFG, 20.0 + grace - 0.1)
    assert policy.master_may_go(clock, CFG, 20.0 + grace)
    alone = Config(cluster="demo", node=0, nodes=1, master="m", idle_s=20, token=TOKEN)
    assert policy.master_may_go(clock, alone, 20.0 + policy.DRAIN_S)


def test_an_orphaned_worker_goes_only_when_idle_and_cut_off_long_enough() -> None:
    wait = max(CFG.idle_s, policy.ORPHAN_MIN_S)
    assert not policy.orphaned(0.0, 0.0, CFG, wait - 1)
    assert policy.orphaned(0.0, 0.0, CFG, wait)
    assert not policy.orphaned(0.0, wait - 5, CFG, wait)  # active here lately


def test_signed_messages_round_trip_and_refuse_forgeries() -> None:
    body = policy.report(1, ["job j-1 running"], "n" * 32, 1000.0)
    line = link.sign(TOKEN, body)
    assert link.verify(TOKEN, line, 1001.0) == body
    assert policy.check_report(body, CFG) == (1, ["job j-1 running"], "n" * 32)
    with pytest.raises(ValueError, match="signature"):
        link.verify("x" * 64, line, 1001.0)
    tampered = line.replace(b"j-1", b"j-2")
    with pytest.raises(ValueError, match="signature"):
        link.verify(TOKEN, tampered, 1001.0)
    with pytest.raises(ValueError, match="too old"):
        link.verify(TOKEN, line, 1000.0 + link.SKEW_S + 1)
    with pytest.raises(ValueError):
        link.verify(TOKEN, b"not json\n", 1000.0)
    for bad in ({**body, "node": 0}, {**body, "node": 3}, {**body, "node": True},
                {**body, "kind": "answer"}, {**body, "nonce": "short"}):
        with pytest.raises(ValueError):
            policy.check_report(bad, CFG)


def test_an_answer_must_echo_the_nonce() -> None:
    decided = Clock(last_activity=0.0, decided=20.0)
    answer = policy.answer(decided, CFG, "a" * 32, 21.0)
    assert policy.check_answer(answer, "a" * 32) is True
    assert policy.check_answer(policy.answer(Clock(last_activity=0.0), CFG, "a" * 32, 1.0),
                               "a" * 32) is False
    with pytest.raises(ValueError):
        policy.check_answer(answer, "b" * 32)


def test_the_node_side_modules_parse_as_python_3_8_and_import_only_the_stdlib() -> None:
    import sys

    here = Path(policy.__file__).parent
    for name in ("autostop_policy.py", "watchdog.py"):
        tree = ast.parse((here / name).read_text(), feature_version=(3, 8))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for imported in names:
                top = imported.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("__future__", "autostop_policy", "paths", "nodefiles", "daemonize", "link", "nodestate", "wire"), \
                    f"{name} imports {imported}"
