"""sandbox/imds.py: each instance's IMDSv2 on the sandbox's endpoint (token rules, 404
until posted), the notices `sandbox interrupt` posts, and when their time has come. The
watcher's own client reads it as it reads EC2's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from werkzeug.test import Client

from clusterkit.node import interruption
from clusterkit_sandbox import imds
from clusterkit_sandbox.state import RUN_DIR


def _app(tmp_path: Path) -> Client:
    (tmp_path / RUN_DIR).mkdir(exist_ok=True)
    passed = []

    def moto(environ, start_response):
        passed.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b"moto"]

    client = Client(imds.Imds(moto, tmp_path))
    client.passed = passed  # type: ignore[attr-defined]
    return client


def _token(client: Client, iid: str) -> str:
    reply = client.put(f"{imds.PREFIX}{iid}{interruption.TOKEN_PATH}",
                       headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    assert reply.status_code == 200
    return reply.get_data(as_text=True)


def test_the_metadata_keeps_imdsv2s_rules_per_instance(tmp_path: Path) -> None:
    client = _app(tmp_path)
    base = f"{imds.PREFIX}i-1"
    assert client.get(base + imds.INSTANCE_ID_PATH).status_code == 401  # no token
    assert client.put(base + interruption.TOKEN_PATH).status_code == 400  # no TTL
    token = _token(client, "i-1")
    header = {"X-aws-ec2-metadata-token": token}
    assert client.get(base + imds.INSTANCE_ID_PATH, headers=header).get_data(
        as_text=True) == "i-1"
    assert client.get(base + interruption.ACTION_PATH, headers=header).status_code == 404
    # another instance's token is not this one's
    assert client.get(f"{imds.PREFIX}i-2{imds.INSTANCE_ID_PATH}",
                      headers=header).status_code == 401
    assert client.get("/anything-else").get_data() == b"moto"


def test_a_posted_notice_is_served_and_falls_due(tmp_path: Path) -> None:
    client = _app(tmp_path)
    now = float(int(time.time()))  # whole seconds: the document's time has no fraction
    imds.post(tmp_path, "i-1", rebalance=True)
    imds.post(tmp_path, "i-1", action="terminate", at=now + 30)
    header = {"X-aws-ec2-metadata-token": _token(client, "i-1")}
    action = client.get(f"{imds.PREFIX}i-1{interruption.ACTION_PATH}", headers=header)
    notice = interruption.parse_action(action.get_data(as_text=True))
    assert notice is not None and notice.action == "terminate"
    assert notice.at == now + 30
    rebalance = client.get(f"{imds.PREFIX}i-1{interruption.REBALANCE_PATH}", headers=header)
    assert interruption.parse_rebalance(rebalance.get_data(as_text=True)) is not None
    assert imds.due(tmp_path, now + 29) == {}
    assert imds.due(tmp_path, now + 30) == {"i-1": "terminate"}
    imds.forget(tmp_path, "i-1")
    assert imds.due(tmp_path, now + 30) == {}


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("2m", 120), ("30", 30),
                                               ("1.5s", 1.5)])
def test_duration(text: str, seconds: float) -> None:
    assert imds.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10h", "-1s", "ten"])
def test_a_bad_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        imds.duration(text)


@pytest.mark.parametrize(("node", "index"), [("master", 0), ("worker-2", 2), ("3", 3)])
def test_node_index(node: str, index: int) -> None:
    assert imds.node_index(node) == index


def test_a_bad_node() -> None:
    with pytest.raises(ValueError, match="not a node"):
        imds.node_index("worker")


def test_a_bad_cluster_name_is_refused_before_anything_is_asked(tmp_path: Path) -> None:
    from clusterkit.errors import UsageError

    with pytest.raises(UsageError, match="not a cluster name"):
        imds.do_interrupt(str(tmp_path / "no-sandbox-here"), "../x", "master")


def test_a_posted_fault_fails_every_request_until_it_ends(tmp_path: Path) -> None:
    """`sandbox imds-fault`: 500s for the instance (its token too), another instance
    unharmed; the posted notice is served again once the fault is over."""
    client = _app(tmp_path)
    header = {"X-aws-ec2-metadata-token": _token(client, "i-1")}
    imds.post(tmp_path, "i-1", action="terminate", at=time.time() + 60)
    imds.post_fault(tmp_path, "i-1", "error", time.time() + 60)
    base = f"{imds.PREFIX}i-1"
    assert client.get(base + interruption.ACTION_PATH, headers=header).status_code == 500
    assert client.put(base + interruption.TOKEN_PATH, headers={
        "X-aws-ec2-metadata-token-ttl-seconds": "60"}).status_code == 500
    _token(client, "i-2")
    imds.post_fault(tmp_path, "i-1", "error", time.time() - 1)  # over
    assert client.get(base + interruption.ACTION_PATH, headers=header).status_code == 200


@pytest.mark.parametrize(("mode", "second", "code", "slept"), [
    ("error", 10, 500, []), ("timeout", 10, 503, [imds.FAULT_HANG]),
    ("mixed", 11, 500, []), ("mixed", 12, 503, [imds.FAULT_HANG])])
def test_fault_modes(mode: str, second: int, code: int, slept: list[float]) -> None:
    naps: list[float] = []
    answer = imds.fault_answer({"mode": mode, "until": 100.0}, float(second), naps.append)
    assert answer is not None and answer[0] == code and naps == slept
    assert imds.fault_answer({"mode": mode, "until": 100.0}, 100.0, naps.append) is None
    assert imds.fault_answer(None, 1.0) is None
