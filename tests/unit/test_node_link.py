"""The link between node daemons (node/link.py): framing over a real socket pair, the
token check of the supervisors' hello, and the watchdogs' signed messages."""

from __future__ import annotations

import json
import socket

import pytest

from clusterkit.node import link

TOKEN = "k" * 64


def test_framed_messages_round_trip_whole_and_in_pieces() -> None:
    a, b = socket.socketpair()
    with a, b:
        sender, receiver = link.Link(a, 1), link.Link(b)
        assert sender.send({"t": "hello", "node": 1}) and sender.send({"t": "hb"})
        assert receiver.read() == [{"t": "hello", "node": 1}, {"t": "hb"}]
        wire = link.frame({"t": "procs", "procs": {"w0": {"exit": 0}}})
        a.sendall(wire[:7])
        assert receiver.read() == []
        a.sendall(wire[7:])
        assert receiver.read() == [{"t": "procs", "procs": {"w0": {"exit": 0}}}]


def test_the_frame_is_one_json_line_as_before() -> None:
    """The bytes on the wire are those of the old programs (json.dumps + newline)."""
    msg = {"t": "stop", "state": "failed", "reason": "x"}
    assert link.frame(msg) == json.dumps(msg).encode() + b"\n"
    assert link.frame({"b": 1, "a": 2}, sort_keys=True) == b'{"a": 2, "b": 1}\n'


def test_a_peer_that_sends_an_endless_line_is_dropped() -> None:
    a, b = socket.socketpair()
    with a, b:
        receiver = link.Link(b)
        a.sendall(b"x" * 60000)
        assert receiver.read() == []
        a.sendall(b"x" * 60000)
        assert receiver.read() is None


def test_a_send_to_a_closed_peer_says_so() -> None:
    a, b = socket.socketpair()
    b.close()
    with a:
        sender = link.Link(a)
        assert not all(sender.send({"t": "hb", "pad": "x" * 100000}) for _ in range(3))


@pytest.mark.parametrize("given", ["k" * 64, "k" * 63, "", None, 42, "é" * 64, ["k" * 64]])
def test_only_the_token_itself_passes_the_token_check(given) -> None:
    assert link.same_token(given, TOKEN) is (given == TOKEN)


def test_a_signed_message_round_trips_with_the_bytes_the_watchdog_sent_before() -> None:
    body = {"kind": "report", "node": 1, "active": [], "nonce": "n" * 32, "time": 1000.0}
    line = link.sign(TOKEN, body)
    assert line == json.dumps({"body": body, "mac": json.loads(line)["mac"]},
                              sort_keys=True).encode() + b"\n"
    assert link.verify(TOKEN, line, 1000.0 + link.SKEW_S) == body


@pytest.mark.parametrize("case", ["wrong token", "tampered", "stale", "future", "no time",
                                  "not json", "not an object", "non-ascii mac"])
def test_a_bad_signature_or_a_stale_message_is_refused(case: str) -> None:
    body = {"kind": "report", "node": 1, "nonce": "n" * 32, "time": 1000.0}
    line = link.sign(TOKEN, body)
    now = 1000.0
    if case == "wrong token":
        line = link.sign("x" * 64, body)
    elif case == "tampered":
        line = line.replace(b'"node": 1', b'"node": 2')
    elif case == "stale":
        now += link.SKEW_S + 1
    elif case == "future":
        now -= link.SKEW_S + 1
    elif case == "no time":
        line = link.sign(TOKEN, {k: v for k, v in body.items() if k != "time"})
    elif case == "not json":
        line = b"not json\n"
    elif case == "not an object":
        line = b'["body", "mac"]\n'
    else:
        line = json.dumps({"body": body, "mac": "é" * 64}).encode() + b"\n"
    with pytest.raises(ValueError):
        link.verify(TOKEN, line, now)
