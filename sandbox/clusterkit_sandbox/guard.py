"""The endpoint's door: every request to the emulator (every AWS service it serves, and
moto's own ``/moto-api/``) must be signed with a key of this daemon (``sigv4.verify``);
anything else is answered 403 with the error AWS gives in that service's protocol
(EC2's ``<Response><Errors>``, the query services' ``<ErrorResponse>``, JSON's
``__type``, REST-JSON's ``x-amzn-ErrorType``), and never reaches moto. The one path
outside it is each instance's metadata (``imds.py``, unsigned as EC2's IMDS is), served
in front of it.

moto's ``/moto-api/`` (reset, state manager, recorder, dashboard) takes only the per-start
key: an instance's role credentials cannot reset the emulator.

Installed as the WSGI app the HTTP server is made with (``GuardedMotoServer``), so no
request is ever served before the door is in place."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any
from urllib.parse import parse_qs

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from clusterkit_sandbox.credentials import ROOT_PRINCIPAL, Keys
from clusterkit_sandbox.sigv4 import Refusal, verify

log = logging.getLogger("clusterkit_sandbox.guard")
PRINCIPAL_ENVIRON = "clusterkit_sandbox.principal"  # who signed, for the layers behind
MOTO_API = "/moto-api"
EC2_VERSION = "2016-11-15"


class Protocol(Enum):
    EC2 = "ec2"
    QUERY = "query"
    JSON = "json"
    REST_JSON = "rest-json"


# the signing names of what clusterkit calls, and their protocols (anything else: by the
# request's shape, ``protocol_of``)
PROTOCOLS = {"ec2": Protocol.EC2, "cloudformation": Protocol.QUERY, "sts": Protocol.QUERY,
             "iam": Protocol.QUERY, "elasticfilesystem": Protocol.REST_JSON,
             "ebs": Protocol.REST_JSON, "pricing": Protocol.JSON, "kms": Protocol.JSON}

# error codes by refusal: (EC2 / query services, JSON protocols)
CODES = {
    Refusal.MISSING: ("MissingAuthenticationToken", "MissingAuthenticationTokenException"),
    Refusal.MALFORMED: ("IncompleteSignature", "IncompleteSignatureException"),
    Refusal.UNKNOWN_KEY: ("InvalidClientTokenId", "UnrecognizedClientException"),
    Refusal.EXPIRED_TOKEN: ("ExpiredToken", "ExpiredTokenException"),
    Refusal.BAD_SIGNATURE: ("SignatureDoesNotMatch", "InvalidSignatureException"),
    Refusal.STALE: ("SignatureDoesNotMatch", "InvalidSignatureException"),
    Refusal.BODY_MISMATCH: ("XAmzContentSHA256Mismatch", "XAmzContentSHA256Mismatch"),
}
EC2_CODES = {Refusal.UNKNOWN_KEY: "AuthFailure", Refusal.STALE: "RequestExpired"}


def protocol_of(service: str, environ: dict[str, Any], body: bytes) -> Protocol:
    """The protocol to answer in: by the scope's service, else by the request's shape."""
    if service in PROTOCOLS:
        return PROTOCOLS[service]
    if environ.get("HTTP_X_AMZ_TARGET"):
        return Protocol.JSON
    form = parse_qs(body.decode("utf-8", "replace")) if body else {}
    form = form or parse_qs(environ.get("QUERY_STRING", ""))
    if "Action" in form:
        return Protocol.EC2 if form.get("Version") == [EC2_VERSION] else Protocol.QUERY
    return Protocol.REST_JSON


def error_response(protocol: Protocol, refusal: Refusal, message: str
                   ) -> tuple[str, list[tuple[str, str]], bytes]:
    """(status, headers, body) of AWS's answer to a refused request."""
    rid = str(uuid.uuid4())
    query_code, json_code = CODES[refusal]
    status = "400 Bad Request" if refusal is Refusal.BODY_MISMATCH else "403 Forbidden"
    if protocol is Protocol.EC2:
        code = EC2_CODES.get(refusal, query_code)
        body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>"
                f"<Code>{code}</Code><Message>{_xml(message)}</Message></Error></Errors>"
                f"<RequestID>{rid}</RequestID></Response>")
        return status, _headers("text/xml", rid, body), body.encode()
    if protocol is Protocol.QUERY:
        body = (f"<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
                f"<Type>Sender</Type><Code>{query_code}</Code><Message>{_xml(message)}"
                f"</Message></Error><RequestId>{rid}</RequestId></ErrorResponse>")
        return status, _headers("text/xml", rid, body), body.encode()
    data = json.dumps({"__type": json_code, "message": message})
    kind = "application/x-amz-json-1.1" if protocol is Protocol.JSON else "application/json"
    return status, [*_headers(kind, rid, data), ("x-amzn-ErrorType", json_code)], data.encode()


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _headers(kind: str, rid: str, body: str) -> list[tuple[str, str]]:
    return [("Content-Type", kind), ("x-amzn-RequestId", rid),
            ("Content-Length", str(len(body.encode())))]


def _body(environ: dict[str, Any]) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length) if length > 0 else b""


class Guard:
    """WSGI: ``app`` only for requests signed with a key of ``keys``."""

    def __init__(self, app: Callable[..., Iterable[bytes]], keys: Keys,
                 clock: Callable[[], float] = time.time) -> None:
        self.app, self.keys, self.clock = app, keys, clock

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = _body(environ)
        verdict = verify(environ, body, self.keys, self.clock())
        refusal, message = verdict.refusal, verdict.message
        path = environ.get("PATH_INFO", "")
        if verdict.key is not None and path.startswith(MOTO_API) and \
                verdict.key.principal != ROOT_PRINCIPAL:
            refusal, message = Refusal.UNKNOWN_KEY, "moto's API takes the sandbox's own key"
        if refusal is not None:
            key = (environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")[2]
                   .partition("/")[0])
            log.warning("refused %s %s from %s: %s (key id %s)",
                        environ.get("REQUEST_METHOD"), path[:80],
                        environ.get("REMOTE_ADDR"), refusal.value, key[:8] or "none")
            status, headers, data = error_response(
                protocol_of(verdict.service, environ, body), refusal, message)
            start_response(status, headers)
            return [data]
        environ["wsgi.input"] = io.BytesIO(body)
        environ[PRINCIPAL_ENVIRON] = verdict.key.principal if verdict.key else ""
        return self.app(environ, start_response)


class GuardedMotoServer(ThreadedMotoServer):
    """moto's threaded server, its HTTP server made with the guard in front of moto's app
    (moto's own makes it with the bare app, to be wrapped only once it serves)."""

    def __init__(self, keys: Keys, ip_address: str = "127.0.0.1") -> None:
        super().__init__(ip_address, 0, verbose=False)
        self.keys = keys

    def _server_entry(self) -> None:
        app = Guard(DomainDispatcherApplication(create_backend_app), self.keys)
        self._server = make_server(self._ip_address, self._port, app, True,
                                   request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()
