"""node/interruption.py against a fake instance metadata service on loopback (an HTTP
server, IMDSv2's rules: PUT for a token, 401 without one or with a revoked one, 404
until a notice is posted), serving the documents captured on real EC2 instances in
tests/data/node-captures/ (imds.*: verbatim copies of ../shared/data/node-captures/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusterkit.node import interruption as imds
from clusterkit.node.interruption import Metadata, Notice, NoticeKind, Watcher
from tests.fake_imds import FakeImds, captured, fake_imds

ACTION_AT = 1505722920.0  # 2017-09-18T08:22:00Z
REBALANCE_AT = 1603786920.0  # 2020-10-27T08:22:00Z


@pytest.fixture
def server() -> Iterator[tuple[str, type[FakeImds]]]:
    with fake_imds() as served:
        yield served


def test_a_get_without_a_token_is_refused_and_the_client_always_sends_one(server) -> None:
    import urllib.error
    import urllib.request

    endpoint, handler = server
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(endpoint + imds.ACTION_PATH, timeout=2)
    assert refused.value.code == 401
    meta = Metadata(endpoint)
    assert meta.get(imds.ACTION_PATH) is None  # 404: nothing posted
    assert meta.notices() == []
    assert [c for c, _p, _s in handler.log[1:]] == ["PUT", "GET", "GET", "GET"]  # one token


def test_the_notices_as_ec2_posts_them(server) -> None:
    endpoint, handler = server
    meta = Metadata(endpoint)
    handler.documents[imds.REBALANCE_PATH] = captured("imds.rebalance-recommendation.json")
    assert meta.notices() == [Notice(NoticeKind.REBALANCE, REBALANCE_AT)]
    handler.documents[imds.ACTION_PATH] = captured("imds.spot-instance-action.terminate.json")
    assert meta.notices() == [Notice(NoticeKind.INTERRUPTION, ACTION_AT, "terminate"),
                              Notice(NoticeKind.REBALANCE, REBALANCE_AT)]
    handler.documents[imds.ACTION_PATH] = captured("imds.spot-instance-action.stop.json")
    assert meta.notices()[0].action == "stop"


def test_a_revoked_token_is_asked_again_once(server) -> None:
    endpoint, handler = server
    meta = Metadata(endpoint)
    assert meta.get(imds.ACTION_PATH) is None
    handler.tokens.clear()  # revoked (or expired on the service's side)
    handler.documents[imds.ACTION_PATH] = captured("imds.spot-instance-action.terminate.json")
    assert meta.get(imds.ACTION_PATH) is not None
    assert handler.issued == 2


def test_a_token_is_renewed_before_it_expires(server) -> None:
    endpoint, handler = server
    now = [0.0]
    meta = Metadata(endpoint, clock=lambda: now[0])
    meta.get(imds.ACTION_PATH)
    now[0] = imds.TOKEN_TTL - 61
    meta.get(imds.ACTION_PATH)
    assert handler.issued == 1
    now[0] = imds.TOKEN_TTL - 59
    meta.get(imds.ACTION_PATH)
    assert handler.issued == 2


def test_the_watcher_polls_every_5_s_and_says_each_notice_once(server) -> None:
    endpoint, handler = server
    now = [100.0]
    watcher = Watcher(Metadata(endpoint), clock=lambda: now[0])
    assert watcher.check() == []
    handler.documents[imds.ACTION_PATH] = captured("imds.spot-instance-action.terminate.json")
    now[0] += imds.POLL - 0.1
    assert watcher.check() == []  # not due: no request made
    gets = len(handler.log)
    now[0] += 0.1
    [notice] = watcher.check()
    assert notice.kind is NoticeKind.INTERRUPTION and len(handler.log) > gets
    now[0] += imds.POLL
    assert watcher.check() == []  # still posted: said once
    handler.documents[imds.REBALANCE_PATH] = captured("imds.rebalance-recommendation.json")
    now[0] += imds.POLL
    assert [n.kind for n in watcher.check()] == [NoticeKind.REBALANCE]


def test_an_unreachable_service_is_said_and_tried_again() -> None:
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    now = [0.0]
    watcher = Watcher(Metadata(f"http://127.0.0.1:{port}", timeout=0.5),
                      clock=lambda: now[0])
    assert watcher.check() == []
    assert watcher.unavailable is not None and f"127.0.0.1:{port}" in watcher.unavailable
    now[0] += imds.POLL
    assert watcher.check() == [] and watcher.unavailable is not None


@pytest.mark.parametrize(("text", "parsed"), [
    ('{"action": "terminate", "time": "2017-09-18T08:22:00Z"}',
     Notice(NoticeKind.INTERRUPTION, ACTION_AT, "terminate")),
    ('{"action": "hibernate", "time": "2017-09-18T08:22:00Z"}',
     Notice(NoticeKind.INTERRUPTION, ACTION_AT, "hibernate")),
    ('{"action": "reboot", "time": "2017-09-18T08:22:00Z"}', None),
    ('{"action": "terminate", "time": "soon"}', None),
    ("<html>404</html>", None),
    ("[]", None),
])
def test_parse_action(text: str, parsed: Notice | None) -> None:
    assert imds.parse_action(text) == parsed


def test_parse_rebalance() -> None:
    assert imds.parse_rebalance('{"noticeTime": "2020-10-27T08:22:00Z"}') == Notice(
        NoticeKind.REBALANCE, REBALANCE_AT)
    assert imds.parse_rebalance('{"noticeTime": 5}') is None


@pytest.mark.parametrize(("left", "configured", "grace"), [
    (120.0, 90.0, 90.0),  # the whole grace fits
    (60.0, 90.0, 50.0),  # capped: it ends MARGIN s before the instance goes
    (5.0, 90.0, 0.0),  # too late for any
])
def test_grace_is_capped_by_the_time_left(left: float, configured: float,
                                          grace: float) -> None:
    notice = Notice(NoticeKind.INTERRUPTION, 1000.0 + left, "terminate")
    assert imds.grace_seconds(notice, configured, now=1000.0) == pytest.approx(grace)
    rebalance = Notice(NoticeKind.REBALANCE, 1000.0)
    assert imds.grace_seconds(rebalance, configured, now=5000.0) == configured
