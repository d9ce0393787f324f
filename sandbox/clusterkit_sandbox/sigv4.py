"""Checking a request's AWS Signature Version 4, as AWS's endpoints do: the signature is
computed again from the request as it arrived (botocore's own canonical request and
signing key code, ``SigV4Auth``, given the headers the client says it signed, the
timestamp it signed at and the body's own hash) with the secret of the key it names, and
compared in constant time (``hmac.compare_digest``).

Refused: a request without an ``Authorization`` header (query-string, presigned, auth
included: nothing clusterkit does uses it), a header that is not SigV4 or misses a part,
a key this daemon does not know, a temporary key without its session token or past its
end, a signature that does not match, an ``X-Amz-Date`` more than 15 minutes from now
(AWS's window), and a body whose ``X-Amz-Content-SHA256`` is neither its hash nor
``UNSIGNED-PAYLOAD``."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from clusterkit_sandbox.credentials import Key, Keys

ALGORITHM = "AWS4-HMAC-SHA256"
SKEW = 15 * 60  # seconds either way, as AWS allows
# signed in place of the body's hash, as AWS takes it (botocore sends it for the operations
# whose body it does not sign, EBS's PutSnapshotBlock: its x-amz-checksum header is signed)
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
AMZ_DATE = "%Y%m%dT%H%M%SZ"
HEADER_RE = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;\-]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$")


class Refusal(Enum):
    """Why a request is refused (its error code depends on the service's protocol)."""

    MISSING = "missing"  # no Authorization header
    MALFORMED = "malformed"  # not a whole SigV4 header, or no X-Amz-Date
    UNKNOWN_KEY = "unknown-key"  # no such key (or a temporary key's token is wrong)
    EXPIRED_TOKEN = "expired-token"  # a temporary key past its end
    BAD_SIGNATURE = "bad-signature"
    STALE = "stale"  # X-Amz-Date outside the window
    BODY_MISMATCH = "body-mismatch"  # X-Amz-Content-SHA256 is not the body's hash


@dataclass(frozen=True)
class Verdict:
    """A request's check: the key that signed it, or why it is refused (and a message
    for the caller, which names no secret)."""

    key: Key | None = None
    service: str = ""  # the signing name of the scope (ec2, sts, elasticfilesystem, ...)
    refusal: Refusal | None = None
    message: str = ""


class _Recompute(SigV4Auth):
    """botocore's signer made to sign as the client did: the headers it names, the hash of
    the body as received."""

    def __init__(self, key: Key, service: str, region: str, signed: list[str]) -> None:
        super().__init__(Credentials(key.key_id, key.secret, key.token), service, region)
        self._signed = signed

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        chosen = HTTPHeaders()
        for name in self._signed:
            for value in request.headers.get_all(name) or [""]:
                chosen[name] = value
        return chosen

    def payload(self, request: AWSRequest) -> str:
        return hashlib.sha256(request.body or b"").hexdigest()


def wsgi_headers(environ: dict) -> HTTPHeaders:
    """The request's headers as received, from the WSGI environ."""
    headers = HTTPHeaders()
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            headers[name[5:].replace("_", "-").lower()] = value
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers[name.replace("_", "-").lower()] = value
    return headers


def request_of(environ: dict, body: bytes) -> AWSRequest:
    """The request as the client signed it: method, path and query as sent (not decoded),
    headers, body."""
    raw = urlsplit(environ.get("RAW_URI") or environ.get("REQUEST_URI") or
                   environ.get("PATH_INFO", "/"))
    query = f"?{raw.query}" if raw.query else ""
    host = environ.get("HTTP_HOST", "localhost")
    return AWSRequest(method=environ.get("REQUEST_METHOD", "GET"),
                      url=f"http://{host}{raw.path or '/'}{query}",
                      headers=wsgi_headers(environ), data=body)


def _refused(refusal: Refusal, message: str, service: str = "") -> Verdict:
    return Verdict(service=service, refusal=refusal, message=message)


def verify(environ: dict, body: bytes, keys: Keys, now: float) -> Verdict:
    """Who signed this request, or why it is refused."""
    header = environ.get("HTTP_AUTHORIZATION", "")
    if not header:
        return _refused(Refusal.MISSING, "Request is missing Authentication Token")
    found = HEADER_RE.match(header)
    if found is None:
        return _refused(Refusal.MALFORMED, f"Authorization header is not {ALGORITHM} "
                        "with Credential, SignedHeaders and Signature")
    service = found["service"]
    stamp = environ.get("HTTP_X_AMZ_DATE", "")
    try:
        signed_at = datetime.strptime(stamp, AMZ_DATE).replace(tzinfo=timezone.utc)
    except ValueError:
        return _refused(Refusal.MALFORMED, "Authorization header requires an X-Amz-Date "
                        "header (YYYYMMDDTHHMMSSZ)", service)
    key = keys.find(found["key"])
    token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN", "")
    if key is None or (key.token is not None and
                       not hmac.compare_digest(key.token.encode(), token.encode())):
        return _refused(Refusal.UNKNOWN_KEY, "The security token included in the request "
                        "is invalid.", service)
    if key.expires is not None and key.expires < now:
        return _refused(Refusal.EXPIRED_TOKEN, "The security token included in the request "
                        "is expired", service)
    if abs(signed_at.timestamp() - now) > SKEW:
        return _refused(Refusal.STALE, f"Signature expired: {stamp} is now earlier than "
                        f"the window of {SKEW // 60} minutes around the server's time",
                        service)
    return _signature(environ, body, key, found, service)


def _signature(environ: dict, body: bytes, key: Key, found: re.Match[str],
               service: str) -> Verdict:
    declared = environ.get("HTTP_X_AMZ_CONTENT_SHA256")
    if declared not in (None, UNSIGNED_PAYLOAD, hashlib.sha256(body).hexdigest()):
        return _refused(Refusal.BODY_MISMATCH, "The provided 'x-amz-content-sha256' header "
                        "does not match what was computed.", service)
    signed = found["signed"].split(";")
    if "host" not in signed:
        return _refused(Refusal.MALFORMED, "the host header must be signed", service)
    request = request_of(environ, body)
    request.context["timestamp"] = environ["HTTP_X_AMZ_DATE"]
    signer = _Recompute(key, service, found["region"], signed)
    if found["date"] != request.context["timestamp"][:8]:
        return _refused(Refusal.BAD_SIGNATURE, "Credential should be scoped to a valid "
                        "date: the one of X-Amz-Date", service)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected.encode(), found["signature"].encode()):
        return _refused(Refusal.BAD_SIGNATURE, "The request signature we calculated does "
                        "not match the signature you provided. Check your AWS Secret Access "
                        "Key and signing method.", service)
    return Verdict(key=key, service=service)
