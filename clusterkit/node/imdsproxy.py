"""The recovery controller's metadata proxy on the master: every other user's connection
to the instance metadata comes here (the ``imdsfence`` rule), and is passed on to the
metadata itself (the controller's user reaches it past the rule) unless it asks for a
role's credentials (``imdsfence.refused``: 403). IMDSv2's two headers pass both ways as
they are; nothing else of the request does (no ``X-Forwarded-For``: IMDSv2 refuses a
token to a request that carries one)."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request

try:  # imported as clusterkit.node.imdsproxy (the controller, tests)
    from .imdsfence import refused
except ImportError:  # beside imdsfence.py, as the node files import each other
    from imdsfence import refused  # type: ignore[no-redef]

DEFAULT_UPSTREAM = "http://169.254.169.254"
TIMEOUT = 5.0  # seconds for the metadata to answer (it answers in milliseconds)
TOKEN = "X-aws-ec2-metadata-token"
TTL = "X-aws-ec2-metadata-token-ttl-seconds"


class Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], upstream: str) -> None:
        super().__init__(address, Handler)
        self.upstream = upstream.rstrip("/")


class Handler(http.server.BaseHTTPRequestHandler):
    server: Proxy

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self.relay("GET")

    def do_PUT(self) -> None:  # noqa: N802
        self.relay("PUT")

    def relay(self, method: str) -> None:
        if refused(method, self.path):
            self.reply(403, b"Forbidden: the recovery controller's role is not served "
                            b"to this user\n")
            return
        headers = {h: self.headers[h] for h in (TOKEN, TTL) if self.headers.get(h)}
        request = urllib.request.Request(self.server.upstream + self.path, method=method,
                                         headers=headers,
                                         data=b"" if method == "PUT" else None)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                self.reply(answer.status, answer.read())
        except urllib.error.HTTPError as exc:
            self.reply(exc.code, exc.read())
        except OSError:
            self.reply(502, b"the instance metadata did not answer\n")

    def reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # every watcher's poll: not the controller's log


def serve(address: str, port: int, upstream: str = DEFAULT_UPSTREAM) -> Proxy:
    """The proxy listening on ``address:port``, served by a daemon thread (it ends with
    the controller)."""
    proxy = Proxy((address, port), upstream)
    threading.Thread(target=proxy.serve_forever, name="imds-proxy", daemon=True).start()
    return proxy
