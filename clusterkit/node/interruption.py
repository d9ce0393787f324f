"""The spot interruption watcher's eyes: EC2 instance metadata (IMDSv2) read for the
two-minute interruption notice and the rebalance recommendation. Stdlib only, Python
>= 3.8: it ships beside the job's supervisor (``jobfiles.NODE_FILES``).

IMDSv2: a session token from ``PUT /latest/api/token`` (its lifetime in the
``X-aws-ec2-metadata-token-ttl-seconds`` header), then each ``GET`` with the token in
``X-aws-ec2-metadata-token``; a GET without one is refused 401, and so is one with an
expired token (asked again, once). ``/latest/meta-data/spot/instance-action`` is 404
until EC2 posts ``{"action": "terminate"|"stop"|"hibernate", "time": ...}`` (about two
minutes before the action; AWS says to poll every 5 s), and
``/latest/meta-data/events/recommendations/rebalance`` is 404 until
``{"noticeTime": ...}`` (no lead time promised). The endpoint is a parameter, so the
sandbox and the tests can serve it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
TOKEN_TTL = 21600  # seconds: IMDSv2's longest
POLL = 5.0  # seconds between two reads, as AWS recommends
TIMEOUT = 1.0  # seconds a metadata request may take (it answers in milliseconds)
MARGIN = 10.0  # seconds kept between the end of the checkpoint grace and the action
# A Capacity Block ends: AWS begins terminating its instances 30 minutes before the end,
# and says so (an EventBridge event, not instance metadata) 10 minutes earlier. The
# node acts when AWS's warning comes: the instance-action of the notice is this.
BLOCK_END_ACTION = "block-end"
BLOCK_TERMINATION_LEAD = 30 * 60.0
BLOCK_NOTICE_LEAD = 40 * 60.0


class NoticeKind(str, Enum):
    INTERRUPTION = "interruption"  # spot/instance-action: the instance goes at ``at``
    REBALANCE = "rebalance"  # a rebalance recommendation: at elevated risk since ``at``
    UNFIT = "unfit"  # the node's own GPU health check (``gpuwatch``): replace it, found at ``at``


# The notices that end the job (with the checkpoint signal first): the node goes.
STOPPING_KINDS = (NoticeKind.INTERRUPTION, NoticeKind.UNFIT)


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    at: float  # epoch seconds: when the action comes (interruption), when EC2 said so
    action: str | None = None  # terminate | stop | hibernate (an interruption)
    reason: str | None = None  # why the node is unfit (its GPUs' evidence)

    def seconds_left(self, now: float) -> float | None:
        """Until the action (an interruption), never below 0; None for a rebalance."""
        return max(0.0, self.at - now) if self.kind is NoticeKind.INTERRUPTION else None

    def to_json(self) -> dict:
        found = {"kind": self.kind.value, "at": self.at, "action": self.action}
        if self.reason is not None:
            found["reason"] = self.reason
        return found

    @classmethod
    def from_json(cls, data: dict) -> Notice | None:
        """``to_json``'s dict (as another node sent it) back; None when it is not one."""
        try:
            reason = data.get("reason")
            return cls(NoticeKind(data.get("kind")), float(data["at"]), data.get("action"),
                       None if reason is None else str(reason))
        except (KeyError, TypeError, ValueError):
            return None


def _epoch(text: object) -> float | None:
    """``2017-09-18T08:22:00Z`` as epoch seconds; None when it is not that."""
    try:
        when = datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc).timestamp()


def _document(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def parse_action(text: str) -> Notice | None:
    """The instance-action document as a Notice; None when it is not one."""
    data = _document(text)
    at = _epoch(data.get("time"))
    action = data.get("action")
    if at is None or action not in ("terminate", "stop", "hibernate"):
        return None
    return Notice(NoticeKind.INTERRUPTION, at, action)


def parse_rebalance(text: str) -> Notice | None:
    """The rebalance recommendation document as a Notice; None when it is not one."""
    at = _epoch(_document(text).get("noticeTime"))
    return None if at is None else Notice(NoticeKind.REBALANCE, at)


def block_end_notice(block_end: float, now: float,
                     lead: float = BLOCK_NOTICE_LEAD) -> Notice | None:
    """The Capacity Block ending at ``block_end`` (epoch seconds) as an interruption
    notice once its end is ``lead`` seconds away or less: the instance goes when AWS
    begins terminating the block's instances (``BLOCK_TERMINATION_LEAD`` before the
    end). None while it is further away."""
    if now < block_end - lead:
        return None
    return Notice(NoticeKind.INTERRUPTION, block_end - BLOCK_TERMINATION_LEAD,
                  BLOCK_END_ACTION)


def grace_seconds(notice: Notice, configured: float, now: float,
                  margin: float = MARGIN) -> float:
    """How long the job's processes get between the checkpoint signal and SIGTERM:
    ``configured`` (``train.checkpoint_grace``), capped so that it ends ``margin``
    seconds before the instance goes (a rebalance recommendation sets no cap)."""
    left = notice.seconds_left(now)
    if left is None:
        return max(0.0, configured)
    return max(0.0, min(configured, left - margin))


class MetadataError(Exception):
    """The metadata service could not be read (not on EC2, or no route to it)."""


def _urlopen(request: object, timeout: float) -> object:
    """urllib's, imported at the first request: the supervisor starts the job's
    processes before it (urllib.request is ~30 ms of imports on every node)."""
    import urllib.request

    return urllib.request.urlopen(request, timeout=timeout)


class Metadata:
    """An IMDSv2 client: one session token, asked again before it expires and once
    when a GET is refused 401."""

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, *, timeout: float = TIMEOUT,
                 clock: Callable[[], float] = time.monotonic,
                 opener: Callable[..., object] | None = None) -> None:
        self.endpoint, self.timeout, self.clock, self.opener = (
            endpoint.rstrip("/"), timeout, clock, opener or _urlopen)
        self._token: str | None = None
        self._expires = 0.0

    def _request(self, request: object) -> str:
        import urllib.error

        try:
            with self.opener(request, timeout=self.timeout) as answer:  # type: ignore[attr-defined]
                return answer.read().decode()
        except urllib.error.HTTPError:
            raise
        except (OSError, ValueError) as exc:  # refused, unreachable, timed out
            raise MetadataError(f"instance metadata at {self.endpoint}: {exc}") from exc

    def token(self) -> str:
        import urllib.error
        import urllib.request

        if self._token is None or self.clock() >= self._expires:
            request = urllib.request.Request(
                self.endpoint + TOKEN_PATH, method="PUT",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)})
            try:
                self._token = self._request(request).strip()
            except urllib.error.HTTPError as exc:
                raise MetadataError(f"instance metadata token: HTTP {exc.code}") from exc
            self._expires = self.clock() + TOKEN_TTL - 60
        return self._token

    def get(self, path: str) -> str | None:
        """The document at ``path``; None when there is none (404)."""
        import urllib.error
        import urllib.request

        for attempt in (1, 2):
            request = urllib.request.Request(
                self.endpoint + path, headers={"X-aws-ec2-metadata-token": self.token()})
            try:
                return self._request(request)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code == 401 and attempt == 1:
                    self._token = None  # expired or revoked: a new one, once
                    continue
                raise MetadataError(f"instance metadata {path}: HTTP {exc.code}") from exc
        return None

    def notices(self) -> list:
        """What is posted now: the interruption notice, then the rebalance
        recommendation (each when there is one)."""
        found = []
        for path, parse in ((ACTION_PATH, parse_action), (REBALANCE_PATH, parse_rebalance)):
            text = self.get(path)
            notice = parse(text) if text is not None else None
            if notice is not None:
                found.append(notice)
        return found


class Watcher:
    """Reads the metadata every ``poll`` seconds when asked (``check``: the supervisor's
    loop asks each round) and returns each notice once: EC2 leaves a notice posted
    until the instance goes. A metadata service that cannot be read is said once
    (``unavailable``) and tried again at the next poll. ``block_end``: the end of the
    Capacity Block the node runs in (epoch seconds, ``wall``'s clock), whose approach is
    a notice too (``block_end_notice``); ``metadata`` None: that alone is watched."""

    def __init__(self, metadata: Metadata | None, *, poll: float = POLL,
                 clock: Callable[[], float] = time.monotonic,
                 block_end: float | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.metadata, self.poll, self.clock = metadata, poll, clock
        self.block_end, self.wall = block_end, wall
        self.seen: set = set()
        self.unavailable: str | None = None
        self._next = 0.0

    def check(self) -> list:
        """The notices posted since the last check, when a poll is due; else []."""
        now = self.clock()
        if now < self._next:
            return []
        self._next = now + self.poll
        posted = self._block_notice() + self._posted()
        new = [n for n in posted if (n.kind, n.at, n.action) not in self.seen]
        self.seen.update((n.kind, n.at, n.action) for n in new)
        return new

    def _posted(self) -> list:
        """What the metadata posts ([] without one, or when it cannot be read)."""
        if self.metadata is None:
            return []
        try:
            posted = self.metadata.notices()
        except MetadataError as exc:
            self.unavailable = str(exc)
            return []
        self.unavailable = None
        return posted

    def _block_notice(self) -> list:
        if self.block_end is None:
            return []
        notice = block_end_notice(self.block_end, self.wall())
        return [] if notice is None else [notice]


def watcher_of(job: dict) -> Watcher | None:
    """The node's watcher from job.json: its instance metadata endpoint (``imds``) and
    its Capacity Block's end (``block_end``); None when it has neither."""
    endpoint, block_end = job.get("imds"), job.get("block_end")
    if not endpoint and block_end is None:
        return None
    try:
        end = None if block_end is None else float(block_end)
    except (TypeError, ValueError):
        end = None
    return Watcher(Metadata(str(endpoint)) if endpoint else None, block_end=end)
