"""A fake EC2 instance metadata service on loopback, IMDSv2's rules: PUT for a token,
401 without one or with a revoked one, 404 until a document is posted (then the
document). For the interruption watcher's tests (unit and the supervisor's)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

from clusterkit.node import interruption as imds

# copies of ../shared/data/node-captures (tests/unit/test_data_captures.py checks them)
CAPTURES = Path(__file__).resolve().parent / "data" / "node-captures"


def captured(name: str) -> str:
    """A document captured on a real EC2 instance."""
    return (CAPTURES / name).read_text()


class FakeImds(http.server.BaseHTTPRequestHandler):
    documents: dict[str, str] = {}
    tokens: set[str] = set()
    issued = 0
    log: list[tuple[str, str, int]] = []

    def _answer(self, code: int, body: str = "") -> None:
        self.log.append((self.command, self.path, code))
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:  # noqa: N802 (http.server's names)
        if self.path != imds.TOKEN_PATH or \
                not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._answer(400)
        type(self).issued += 1
        token = f"token-{self.issued}"
        self.tokens.add(token)
        self._answer(200, token)

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("X-aws-ec2-metadata-token") not in self.tokens:
            return self._answer(401)
        body = self.documents.get(self.path)
        if body is None:
            return self._answer(404, captured("imds.404-no-notice.http-body.txt"))
        self._answer(200, body)

    def log_message(self, *args: object) -> None:
        pass




@contextlib.contextmanager
def fake_imds() -> Iterator[tuple[str, type[FakeImds]]]:
    """(endpoint, handler class: its ``documents`` path -> text to serve, ``tokens``,
    ``issued``, ``log``), serving until the block ends."""
    handler = type("Handler", (FakeImds,), {"documents": {}, "tokens": set(), "issued": 0,
                                            "log": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
