"""How many calls clusterkit's retry policy makes against a throttling endpoint.

A local HTTP server on 127.0.0.1 answers every EC2 request with ``RequestLimitExceeded``
(HTTP 503, EC2's error body) and counts them. botocore's own waits are taken out (its
jittered backoff and the adaptive mode's token bucket, both botocore internals), so the
test counts attempts without sleeping through them; what is retried and how often is
botocore's real logic under clusterkit's ``RETRY_CONFIG``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.retries import bucket, standard

from clusterkit.aws import session as aws_session

THROTTLED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
             b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
             b"</Message></Error></Errors><RequestID>r-1</RequestID></Response>")


class Throttling(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).calls += 1
        self.send_response(503)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(THROTTLED)))
        self.end_headers()
        self.wfile.write(THROTTLED)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def throttling_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Throttling]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Throttling)
    Throttling.calls = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0)
    monkeypatch.setattr(bucket.TokenBucket, "acquire", lambda self, *a, **k: True)
    try:
        yield Throttling
    finally:
        server.shutdown()
        server.server_close()


def test_max_attempts_10_means_one_call_and_ten_retries(throttling_endpoint) -> None:
    """docs/howto/provision.md: "a throttled call is made 11 times in all (the first call
    and 10 retries)"; botocore's client-config ``max_attempts`` counts retries, not calls."""
    assert aws_session.RETRY_CONFIG.retries == {"mode": "adaptive", "max_attempts": 10}
    ec2 = aws_session.client(aws_session.make_session("us-east-1"), "ec2")
    with pytest.raises(ClientError) as caught:
        ec2.describe_regions()
    assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 10
    assert throttling_endpoint.calls == 11


def test_an_endpoint_refusing_the_connection_is_tried_twice_not_eleven_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused connection (nothing listens on the port) fails after two tries, while
    throttling keeps its ten retries above: the user hears of a wrong AWS_ENDPOINT_URL in
    a moment, not after ~25 s of backoff."""
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0)
        ec2 = aws_session.client(aws_session.make_session("us-east-1"), "ec2")
        sent: list[str] = []
        ec2.meta.events.register("before-send", lambda request, **_: sent.append(request.url))
        with pytest.raises(EndpointConnectionError):
            ec2.describe_regions()
    assert len(sent) == aws_session.UNREACHABLE_ATTEMPTS == 2
