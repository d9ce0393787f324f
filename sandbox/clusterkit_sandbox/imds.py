"""Instance metadata in the sandbox: each instance's IMDSv2 at a path of the sandbox's own
endpoint (``<endpoint>/_clusterkit/imds/<instance id>``, so a node dials loopback only),
with IMDSv2's rules (PUT for a session token, 401 without one, 404 until a document is
posted), its instance id, and the spot ``instance-action`` notice and rebalance
recommendation that `clusterkit sandbox interrupt` posts. When a notice's time comes,
the node agent stops or terminates the instance, as EC2 does (``due``).

A token (and with it anything, role credentials included) only for the instance's own
node or the sandbox's user (``peers``): EC2's metadata is reachable from the instance
alone, and on this machine any local user could reach the port. The role credentials are
temporary keys the endpoint accepts (``credentials.Keys.temporary``), naming the role and
the instance.

A node's firewall rule that sends a user's metadata connections elsewhere (the recovery
controller's fence on the master: ``netfilter``) is applied here, to the caller the
rule catches.

The notices live in ``run/imds.json`` (instance id -> {"action": doc, "rebalance": doc}),
written by the CLI, read by the server at each request. So does a metadata fault that
`clusterkit sandbox imds-fault` posts ({"fault": {"mode": ..., "until": epoch}}): until
then every request of that instance answers 500, hangs past any client's timeout
(``FAULT_HANG`` s, then 503), or both in turn (``mixed``: by the second), as an endpoint
having a bad minute does.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clusterkit.node.interruption import ACTION_PATH, REBALANCE_PATH, TOKEN_PATH
from clusterkit.statedir import check_name
from clusterkit_sandbox import netfilter
from clusterkit_sandbox.credentials import Keys
from clusterkit_sandbox.state import DIR_ENV, RUN_DIR, read_json, write_json

PREFIX = "/_clusterkit/imds/"  # + an instance's id: its metadata (``instance_url``)
NOTICES_FILE = "imds.json"
INSTANCE_ID_PATH = "/latest/meta-data/instance-id"
IDENTITY_PATH = "/latest/dynamic/instance-identity/document"
ROLE_PATH = "/latest/meta-data/iam/security-credentials/"  # + the role's name
CREDENTIALS_TTL = 6 * 3600  # as EC2's: rotated well before they expire
TOKEN_HEADER = "HTTP_X_AWS_EC2_METADATA_TOKEN"
TTL_HEADER = "HTTP_X_AWS_EC2_METADATA_TOKEN_TTL_SECONDS"
FAULT_MODES = ("error", "timeout", "mixed")
FAULT_HANG = 3.0  # seconds a "timeout" request hangs (clusterkit's watcher waits 1 s)


def instance_url(endpoint: str, instance_id: str) -> str:
    """Where an instance reads its metadata: a path of the sandbox's own (loopback)
    endpoint (handed to clusterkit as ``mode.json``'s metadata_url)."""
    return endpoint.rstrip("/") + PREFIX + instance_id


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def post(state_dir: Path, instance_id: str, *, action: str | None = None,
         at: float | None = None, rebalance: bool = False) -> None:
    """Post an interruption notice (``action`` at ``at``) or a rebalance recommendation
    for ``instance_id`` (read by the server at the next request)."""
    path = state_dir / RUN_DIR / NOTICES_FILE
    notices = read_json(path, {}) or {}
    mine = notices.setdefault(instance_id, {})
    if rebalance:
        mine["rebalance"] = {"noticeTime": iso(time.time())}
    if action is not None and at is not None:
        mine["action"] = {"action": action, "time": iso(at)}
    write_json(path, notices)


def post_fault(state_dir: Path, instance_id: str, mode: str, until: float) -> None:
    """Every metadata request of ``instance_id`` fails as ``mode`` says until ``until``."""
    path = state_dir / RUN_DIR / NOTICES_FILE
    notices = read_json(path, {}) or {}
    notices.setdefault(instance_id, {})["fault"] = {"mode": mode, "until": until}
    write_json(path, notices)


def fault_answer(fault: dict[str, Any] | None, now: float,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[int, str] | None:
    """The failed answer a posted fault gives at ``now``; None once it is over."""
    if not fault or float(fault.get("until") or 0) <= now:
        return None
    mode = fault.get("mode")
    if mode == "mixed":
        mode = "error" if int(now) % 2 else "timeout"
    if mode == "timeout":
        sleep(FAULT_HANG)
        return 503, "Service Unavailable (timed out)"
    return 500, "Internal Server Error"


def due(state_dir: Path, now: float) -> dict[str, str]:
    """instance id -> the action (terminate | stop) whose notice's time has come."""
    out = {}
    for iid, mine in (read_json(state_dir / RUN_DIR / NOTICES_FILE, {}) or {}).items():
        doc = mine.get("action") or {}
        when = doc.get("time")
        if when and datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=timezone.utc).timestamp() <= now:
            out[iid] = str(doc.get("action"))
    return out


def forget(state_dir: Path, instance_id: str) -> None:
    """The instance went: its notices with it."""
    path = state_dir / RUN_DIR / NOTICES_FILE
    notices = read_json(path, {}) or {}
    if notices.pop(instance_id, None) is not None:
        write_json(path, notices)


class Imds:
    """WSGI: the metadata paths answered here, anything else passed to ``app``."""

    def __init__(self, app: Callable[..., Iterable[bytes]], state_dir: Path,
                 keys: Keys | None = None,
                 callers: Callable[[dict[str, Any], str], bool] | None = None,
                 fence: Callable[[dict[str, Any], str], tuple[str, int] | None] | None = None
                 ) -> None:
        """``keys``: the endpoint's (the role credentials handed out join them);
        ``callers``: who may have a token of an instance (the daemon's: its own user or
        the instance's node, ``peers.metadata_callers``; None: anyone, for tests of the
        metadata alone); ``fence``: where the node's firewall sends a caller instead
        (``netfilter.fence``: the recovery controller's metadata proxy), None: nowhere."""
        self.app, self.state_dir = app, state_dir
        self.keys = keys or Keys()
        self.callers, self.fence = callers, fence
        self.tokens: dict[str, tuple[str, float]] = {}  # token -> (instance id, expires)

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(PREFIX):
            return self.app(environ, start_response)
        iid, _, rest = path[len(PREFIX):].partition("/")
        method = environ.get("REQUEST_METHOD", "GET")
        target = self.fence(environ, iid) if self.fence is not None else None
        if target is not None:
            code, body = netfilter.forward(target, method, "/" + rest, environ)
        else:
            code, body = self.answer(method, iid, "/" + rest, environ)
        data = body.encode()
        start_response(f"{code} {'OK' if code == 200 else 'Error'}",
                       [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
        return [data]

    def answer(self, method: str, iid: str, rest: str,
               environ: dict[str, Any]) -> tuple[int, str]:
        mine = (read_json(self.state_dir / RUN_DIR / NOTICES_FILE, {}) or {}).get(iid, {})
        failed = fault_answer(mine.get("fault"), time.time())
        if failed is not None:
            return failed
        if method == "PUT" and rest == TOKEN_PATH:
            try:
                ttl = int(environ.get(TTL_HEADER, ""))
            except ValueError:
                return 400, "missing or bad X-aws-ec2-metadata-token-ttl-seconds"
            if self.callers is not None and not self.callers(environ, iid):
                return 403, "Forbidden: not a process of this instance"
            token = secrets.token_urlsafe(24)
            self.tokens[token] = (iid, time.time() + max(1, min(ttl, 21600)))
            return 200, token
        held = self.tokens.get(environ.get(TOKEN_HEADER, ""))
        if method != "GET" or held is None or held[0] != iid or held[1] < time.time():
            return 401, "Unauthorized"
        if rest == INSTANCE_ID_PATH:
            return 200, iid
        if rest in (IDENTITY_PATH, ROLE_PATH) or rest.startswith(ROLE_PATH):
            return self.described(iid, rest)
        doc = {ACTION_PATH: mine.get("action"), REBALANCE_PATH: mine.get("rebalance")}.get(rest)
        if doc is None:
            return 404, "Not Found"
        return 200, json.dumps(doc)


    def described(self, iid: str, rest: str) -> tuple[int, str]:
        """The identity document, and the instance profile role's name and temporary
        credentials (what boto3 on the node reads: a key of the endpoint's, naming the
        instance and its role), 404 without a profile, as EC2 answers."""
        from clusterkit_sandbox.moto_models import instance_metadata

        about = instance_metadata(iid)
        if about is None:
            return 404, "Not Found"
        role = about.pop("role")
        if rest == IDENTITY_PATH:
            return 200, json.dumps(about, indent=2)
        if role is None or rest not in (ROLE_PATH, ROLE_PATH + role):
            return 404, "Not Found"
        if rest == ROLE_PATH:
            return 200, role
        return 200, json.dumps(role_credentials(self.keys, iid, role, time.time()), indent=2)


def role_credentials(keys: Keys, iid: str, role: str, now: float) -> dict[str, str]:
    """A credentials document as EC2's IMDS serves it: a fresh temporary key of the
    endpoint's each time, for ``role`` on instance ``iid`` (so the endpoint can tell who
    calls), accepted until it expires and only while this daemon runs."""
    key = keys.temporary(f"role/{role}@{iid}", CREDENTIALS_TTL, now)
    return {"Code": "Success", "LastUpdated": iso(now), "Type": "AWS-HMAC",
            "AccessKeyId": key.key_id, "SecretAccessKey": key.secret,
            "Token": key.token or "", "Expiration": iso(now + CREDENTIALS_TTL)}


DURATION_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(s|m)?$")
NODE_RE = re.compile(r"^(master|worker-([0-9]+)|[0-9]+)$")


def duration(text: str) -> float:
    """``10s``, ``2m`` or ``30`` (seconds); ValueError otherwise."""
    found = DURATION_RE.match(text.strip())
    if found is None:
        raise ValueError(f"not a duration: {text!r} (e.g. 10s, 2m)")
    return float(found.group(1)) * (60 if found.group(2) == "m" else 1)


def node_index(node: str) -> int:
    """``master``, ``worker-N`` or ``N``; ValueError otherwise."""
    found = NODE_RE.match(node)
    if found is None:
        raise ValueError(f"not a node: {node!r} (master, worker-N or an index)")
    return 0 if node == "master" else int(found.group(2) or node)


def find_instance(ec2: Any, cluster: str, index: int) -> str | None:
    """The running (or pending) instance of ``cluster`` with node index ``index``."""
    from clusterkit.aws.instances import to_node

    reply = ec2.describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    nodes = [to_node(i, "") for r in reply["Reservations"] for i in r["Instances"]]
    return next((n.instance_id for n in nodes if n.index == index), None)


def running_instance(directory: str | None, cluster: str, node: str,
                     region: str) -> str | None:
    """The instance of NODE of CLUSTER running in the sandbox (None: none); SandboxError
    when the sandbox is not running, or its endpoint no longer answers (it stopped)."""
    from clusterkit.aws.errors import aws_call
    from clusterkit.sandboxmode import sandbox_env
    from clusterkit_sandbox import credentials

    index = node_index(node)
    env = sandbox_env(directory)
    ec2 = credentials.client(Path(env[DIR_ENV]), "ec2", env["AWS_ENDPOINT_URL"], region)
    with aws_call("DescribeInstances", f"cluster {cluster}", sandbox=True):
        return find_instance(ec2, cluster, index)


def do_interrupt(directory: str | None, cluster: str, node: str, *, notice: float = 120.0,
                 rebalance_first: float = 0.0, action: str = "terminate",
                 region: str = "us-east-1",
                 sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """`clusterkit sandbox interrupt`: a rebalance recommendation first (then
    ``rebalance_first`` s), then the interruption notice, ``action`` ``notice`` s later;
    the agent carries it out then. ValueError for a node that is not running."""
    from clusterkit_sandbox.state import state_dir

    check_name(cluster)  # UsageError (exit 2) before anything is asked
    iid = running_instance(directory, cluster, node, region)
    if iid is None:
        raise ValueError(f"no running node {node} of cluster {cluster} in {region}")
    where = state_dir(directory)
    if rebalance_first > 0:
        post(where, iid, rebalance=True)
        sleep(rebalance_first)
    at = time.time() + notice
    post(where, iid, action=action, at=at)
    return {"cluster": cluster, "node": node, "instance_id": iid, "action": action,
            "at": iso(at), "rebalance_first": rebalance_first}


def do_imds_fault(directory: str | None, cluster: str, node: str, *, seconds: float,
                  mode: str = "mixed", region: str = "us-east-1") -> dict[str, Any]:
    """`clusterkit sandbox imds-fault`: NODE's metadata endpoint fails (``mode``) for
    ``seconds``. ValueError for a node that is not running or an unknown mode."""
    from clusterkit_sandbox.state import state_dir

    check_name(cluster)
    if mode not in FAULT_MODES:
        raise ValueError(f"unknown fault mode {mode!r} (one of {', '.join(FAULT_MODES)})")
    iid = running_instance(directory, cluster, node, region)
    if iid is None:
        raise ValueError(f"no running node {node} of cluster {cluster} in {region}")
    until = time.time() + seconds
    post_fault(state_dir(directory), iid, mode, until)
    return {"cluster": cluster, "node": node, "instance_id": iid, "mode": mode,
            "until": iso(until)}
