"""The link between a node's daemon and the master's: stdlib only, Python >= 3.8.

Shipped beside ``supervisor.py`` into every job dir and beside ``watchdog.py`` into the
autostop dir (``bundle.SUPERVISOR``, ``bundle.WATCHDOG``). On the wire, a message is one
JSON object on one line (``frame``). Two ways to prove a peer knows the shared token:
- the supervisors (``coord``) keep one connection per node; its first message carries
  the job's token (``same_token``), the rest are plain (``Link``);
- the watchdogs open one connection per report; every message is signed: an HMAC-SHA256
  of its body, which carries its time (``sign``, ``verify``: no replay after ``SKEW_S``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket

MAX_LINE = 1 << 16  # a peer whose unfinished line grows past this is dropped
SKEW_S = 300.0  # a signed message older (or newer) than this is refused


def frame(msg: dict, sort_keys: bool = False) -> bytes:
    """``msg`` as it goes on the wire: one JSON line."""
    return json.dumps(msg, sort_keys=sort_keys).encode() + b"\n"


class Link:
    """One connection's messages, framed (a socket and the node at its other end)."""

    def __init__(self, sock: socket.socket, node: int | None = None) -> None:
        self.sock, self.node, self.buf = sock, node, b""
        sock.settimeout(2.0)

    def send(self, msg: dict) -> bool:
        try:
            self.sock.sendall(frame(msg))
            return True
        except OSError:
            return False

    def read(self) -> list | None:
        """Whole messages now readable; None when the peer is gone or misbehaves."""
        try:
            data = self.sock.recv(65536)
        except OSError:
            return None
        self.buf += data
        if not data or len(self.buf) > MAX_LINE:
            return None
        *lines, self.buf = self.buf.split(b"\n")
        try:
            msgs = [json.loads(line) for line in lines if line.strip()]
        except ValueError:
            return None
        return msgs if all(isinstance(m, dict) for m in msgs) else None


def same_token(given: object, token: str) -> bool:
    """Whether ``given`` (from a peer: any JSON value) is ``token``, in constant time."""
    # bytes: compare_digest raises on a non-ASCII str
    return hmac.compare_digest(str(given).encode(), token.encode())


def _mac(token: str, body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()


def sign(token: str, body: dict) -> bytes:
    """One message: a JSON line of the body and its HMAC-SHA256 under the token."""
    return frame({"body": body, "mac": _mac(token, body)}, sort_keys=True)


def verify(token: str, line: bytes, now: float) -> dict:
    """The body of a signed message; ValueError when it is not signed with the token or
    its time is more than SKEW_S away from ``now``."""
    try:
        data = json.loads(line.decode())
        body, mac = data["body"], str(data["mac"])
        sent = float(body["time"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError("not a signed message") from None
    if not isinstance(body, dict) or not same_token(mac, _mac(token, body)):
        raise ValueError("bad signature")
    if abs(now - sent) > SKEW_S:
        raise ValueError("message too old or from the future")
    return body
