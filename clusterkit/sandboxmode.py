"""Sandbox mode, the product's half: the configuration a running sandbox hands
clusterkit, read, checked and applied. Stdlib only.

The sandbox is a package of its own (``clusterkit-sandbox``, in ``sandbox/``) and
clusterkit imports nothing of it. While its daemon runs it keeps ``mode.json`` in its
state dir (``--dir`` / ``CLUSTERKIT_SANDBOX_DIR``, default ``~/.clusterkit/sandbox``),
written whole before the daemon says it is up and removed when it stops::

    {"format": "clusterkit-sandbox-mode", "version": 2,
     "pid": 4242, "daemon": "clusterkit_sandbox.server",
     "endpoint": "http://127.0.0.1:40123",
     "address_map": "/home/me/.clusterkit/sandbox/addresses.json",
     "node_address_map": "/var/lib/clusterkit-sandbox/view/addresses.json",
     "metadata_url": "http://127.0.0.1:40123/_clusterkit/imds/{instance_id}",
     "caller_cidr": "127.0.0.1/32",
     "credentials_file": "/home/me/.clusterkit/sandbox/auth/credentials",
     "config_file": "/home/me/.clusterkit/sandbox/auth/config", "time_scale": null}

``--sandbox`` (or ``CLUSTERKIT_SANDBOX=1``) reads it (``sandbox_env``): the sandbox runs
when the file is there and ``pid`` is alive with ``daemon`` and the state dir on its
command line; every URL in it must be loopback. Then only environment variables change
(``apply``), so every process clusterkit starts inherits sandbox mode:

- the standard ones botocore reads: ``AWS_ENDPOINT_URL``; ``AWS_SHARED_CREDENTIALS_FILE``
  and ``AWS_CONFIG_FILE`` naming the sandbox's files of this start's credentials (its
  endpoint refuses any other key; every variable that would come before them in
  botocore's chain, keys, a profile, a web identity, is dropped: they must win over real
  ones); a region where none is set; and ``AWS_EC2_METADATA_DISABLED`` (never probe
  169.254.169.254 for credentials);
- ``CLUSTERKIT_SANDBOX=1`` (the net guard, ``clusterkit.netguard``: loopback only);
- ``CLUSTERKIT_ADDRESS_MAP``: the address hook's map (``clusterkit.remote.address``);
- ``CLUSTERKIT_CALLER_CIDR``: the SSH source rule, instead of asking the internet;
- ``CLUSTERKIT_SANDBOX_METADATA_URL``: where each instance's metadata is served (the
  nodes' interruption watch, the master's role credentials);
- ``CLUSTERKIT_SANDBOX_NODE_ADDRESS_MAP``: the address map as the nodes see it (the
  master's recovery controller dials the others through it);
- ``CLUSTERKIT_TIME_SCALE`` for a timed sandbox (``clusterkit.timescale``);
- ``CLUSTERKIT_SANDBOX_DIR``: the state dir, for the processes started from here.

``node_env`` is what a process clusterkit starts on a sandbox node (the recovery
controller) gets of it.

``client_cut``: the one fault the sandbox puts in the client itself (`clusterkit sandbox
cut-client`, ``CLIENT_CUT_FILE`` in the state dir): until the time it names, every SSH
connection this client has or opens to the nodes fails (``clusterkit.remote.connect``),
as when the client's own network drops. Only in sandbox mode with the state dir named
(``CLUSTERKIT_SANDBOX_DIR``, as ``apply`` sets it): never outside the sandbox, never on a
node."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from clusterkit.errors import NetworkSafetyError, SandboxError
from clusterkit.netguard import SANDBOX_ENV, is_loopback, sandbox_mode
from clusterkit.timescale import TIME_SCALE_ENV

DIR_ENV = "CLUSTERKIT_SANDBOX_DIR"
MODE_FILE = "mode.json"
FORMAT = "clusterkit-sandbox-mode"
VERSION = 2  # 2: the credentials' files (the endpoint checks every request's signature)
ADDRESS_MAP_ENV = "CLUSTERKIT_ADDRESS_MAP"  # the address hook (clusterkit.remote.address)
METADATA_URL_ENV = "CLUSTERKIT_SANDBOX_METADATA_URL"
NODE_ADDRESS_MAP_ENV = "CLUSTERKIT_SANDBOX_NODE_ADDRESS_MAP"
INSTANCE_ID = "{instance_id}"  # in metadata_url: the instance's id goes there
CREDENTIALS_FILE_ENV = "AWS_SHARED_CREDENTIALS_FILE"
CONFIG_FILE_ENV = "AWS_CONFIG_FILE"
# what would sign instead of the sandbox's credentials file, or beside it: dropped
DROPPED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
           "AWS_SECURITY_TOKEN", "AWS_CREDENTIAL_EXPIRATION", "AWS_PROFILE",
           "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
           "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
           "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
           "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
DEFAULT_REGION = "us-east-1"
RESTART_HINT = "`clusterkit sandbox stop`, then `clusterkit sandbox start`"


CLIENT_CUT_FILE = "client-cut.json"  # in the state dir: {"until": epoch seconds}
CUT_READ_EVERY = 0.1  # seconds one read of it is kept (asked at every socket read)
_cut_read: dict[str, Any] = {"at": float("-inf"), "until": None}


def client_cut() -> float | None:
    """Until when (epoch seconds) the sandbox cuts this client's connections to the
    nodes; None: not cut, or not in sandbox mode with a state dir (read at most every
    CUT_READ_EVERY s)."""
    where = os.environ.get(DIR_ENV)
    if not where or not sandbox_mode():
        return None
    if time.monotonic() - _cut_read["at"] >= CUT_READ_EVERY:
        try:
            with open(Path(where) / CLIENT_CUT_FILE) as handle:
                until = json.load(handle).get("until")
        except (OSError, ValueError, AttributeError):
            until = None
        _cut_read.update(at=time.monotonic(),
                         until=until if isinstance(until, (int, float)) else None)
    until = _cut_read["until"]
    return until if until is not None and time.time() < until else None


def state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit`` > ``$CLUSTERKIT_SANDBOX_DIR`` > ``~/.clusterkit/sandbox`` (absolute)."""
    raw = explicit or os.environ.get(DIR_ENV) or Path.home() / ".clusterkit" / "sandbox"
    return Path(raw).expanduser().resolve()


@dataclass(frozen=True)
class Mode:
    """What a running sandbox hands clusterkit (``mode.json``; one writer, the sandbox's
    daemon, and one reader, ``read_mode``)."""

    pid: int  # the sandbox's daemon
    daemon: str  # a word of the daemon's command line (beside the state dir)
    endpoint: str  # the AWS endpoint, http://127.0.0.1:PORT
    address_map: str  # the address hook's map here: {instance id: address}
    node_address_map: str  # the same map where the sandbox's nodes see it
    metadata_url: str  # an instance's metadata, INSTANCE_ID in it
    caller_cidr: str  # where the nodes' SSH rule lets connections come from
    credentials_file: str  # this start's key (AWS's shared credentials format, 0600)
    config_file: str  # a config of no profile of the user's (AWS's config format)
    time_scale: float | None = None  # a timed sandbox's scale (None: AWS's pace)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Mode:
        """The mode of ``data`` (a mode.json of VERSION); ValueError saying what is wrong."""
        values = {f.name: data.get(f.name) for f in fields(cls)}
        for name, value in values.items():
            wanted = (int, float, type(None)) if name == "time_scale" else \
                int if name == "pid" else str
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise ValueError(f"{name} is {value!r}")
        scale = values["time_scale"]
        if scale is not None and not 0 < scale <= 1:
            raise ValueError(f"time_scale {scale} is not in (0, 1]")
        for name in ("address_map", "node_address_map", "credentials_file", "config_file"):
            if not values[name].startswith("/"):
                raise ValueError(f"{name} {values[name]!r} is not an absolute path")
        if INSTANCE_ID not in values["metadata_url"]:
            raise ValueError(f"metadata_url {values['metadata_url']!r} has no {INSTANCE_ID}")
        return cls(**values)


def daemon_alive(pid: Any, daemon: str, directory: Path) -> bool:
    """``pid`` is alive and is the sandbox daemon of ``directory`` (``daemon`` and the
    directory on its command line): a pid recorded before a reboot (or a hand-edited
    file) may now belong to anything, never trust or signal it."""
    from clusterkit.node.reaping import pid_alive

    if not pid_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return daemon.encode() in argv and str(directory).encode() in argv


def read_mode(directory: str | os.PathLike[str] | None = None) -> Mode:
    """The running sandbox's mode; SandboxError when none runs there, or when its file
    is of another version or not usable; NetworkSafetyError for a URL off loopback."""
    where = state_dir(directory)
    path = where / MODE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # missing, unreadable, not JSON (never half-written)
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("daemon"), str) or \
            not daemon_alive(data.get("pid"), data["daemon"], where):
        raise SandboxError.not_running(f"state dir {where}")
    if (data.get("format"), data.get("version")) != (FORMAT, VERSION):
        raise SandboxError(f"the sandbox in {where} hands over {data.get('format')} version "
                           f"{data.get('version')}; this clusterkit reads {FORMAT} version "
                           f"{VERSION}", "install the clusterkit-sandbox of this clusterkit "
                           f"(scripts/install.sh), then {RESTART_HINT}")
    try:
        mode = Mode.from_json(data)
    except ValueError as exc:
        raise SandboxError(f"{path} is not a sandbox configuration clusterkit can use: {exc}",
                           RESTART_HINT) from None
    for what, url in (("endpoint", mode.endpoint), ("metadata URL", mode.metadata_url)):
        host = urlsplit(url.replace(INSTANCE_ID, "i")).hostname or ""
        if not is_loopback(host):
            raise NetworkSafetyError(
                f"the sandbox in {where} names a {what} off loopback ({url}): sandbox mode "
                "connects to 127.0.0.0/8 only", RESTART_HINT)
    return mode


def sandbox_env(directory: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The variables that make any AWS SDK / clusterkit process use the sandbox: its
    endpoint, and its credentials by the names of their files (no key in them; a process
    given these must not have any of DROPPED, which ``apply`` removes).

    Why a file and not the keys themselves in ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY``: the environment is inherited by every process clusterkit
    starts (ssh and what it runs, a recovery controller's launcher), lives as long as each,
    and can be read from ``/proc/PID/environ`` by anything of the same uid and by root
    (which every sandbox node is). The sandbox's file (0600 in a 0700 directory of its
    state dir) is read by botocore once per client and shown to no one else; its name is
    no secret. The config file beside it keeps a profile of the user's ``~/.aws/config``
    (SSO, ``role_arn``, ``credential_process``: each ahead of a credentials file in
    botocore's chain) from signing sandbox requests with real credentials."""
    from clusterkit.aws.identity import OVERRIDE_ENV

    mode = read_mode(directory)
    where = state_dir(directory)
    if not os.access(mode.credentials_file, os.R_OK):
        raise SandboxError(f"the sandbox in {where} has no credentials file this user can "
                           f"read ({mode.credentials_file})",
                           f"run clusterkit as the user who started it, or {RESTART_HINT}")
    scale = {TIME_SCALE_ENV: str(mode.time_scale)} if mode.time_scale else {}
    return {**scale,
        "AWS_ENDPOINT_URL": mode.endpoint,
        CREDENTIALS_FILE_ENV: mode.credentials_file,
        CONFIG_FILE_ENV: mode.config_file,
        "AWS_EC2_METADATA_DISABLED": "true",  # never probe 169.254.169.254 for credentials
        OVERRIDE_ENV: mode.caller_cidr,  # the nodes' SSH rule: no public-IP lookup
        SANDBOX_ENV: "1",
        ADDRESS_MAP_ENV: mode.address_map,
        METADATA_URL_ENV: mode.metadata_url,
        NODE_ADDRESS_MAP_ENV: mode.node_address_map,
        DIR_ENV: str(where),
    }


def apply(env: MutableMapping[str, str], directory: str | os.PathLike[str] | None = None
          ) -> dict[str, str]:
    """Set the sandbox variables in ``env``; a region only if none is set. Keys,
    profiles and every other source of credentials ahead of the sandbox's file are
    dropped (DROPPED): the sandbox's must win over real ones."""
    values = sandbox_env(directory)
    env[SANDBOX_ENV] = "1"  # guard on before anything else can connect
    env.update(values)
    if TIME_SCALE_ENV not in values:
        env.pop(TIME_SCALE_ENV, None)  # an untimed sandbox: AWS's pace
    for name in DROPPED:
        env.pop(name, None)
    if not env.get("AWS_REGION") and not env.get("AWS_DEFAULT_REGION"):
        env["AWS_DEFAULT_REGION"] = DEFAULT_REGION
    return values


def enter_sandbox_mode() -> str:
    """Set AWS_ENDPOINT_URL and the sandbox's credentials file for the running sandbox;
    the endpoint (the CLI says so on every run)."""
    os.environ[SANDBOX_ENV] = "1"
    return apply(os.environ)["AWS_ENDPOINT_URL"]


def metadata_url(instance_id: str, env: Mapping[str, str] | None = None) -> str:
    """Where ``instance_id`` reads its metadata in the sandbox ("" where sandbox mode did
    not say)."""
    template = (os.environ if env is None else env).get(METADATA_URL_ENV, "")
    return template.replace(INSTANCE_ID, instance_id) if INSTANCE_ID in template else ""


def node_env(instance_id: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Sandbox mode for a process clusterkit starts on the sandbox's node ``instance_id``
    (the master's recovery controller): the endpoint, the instance's own metadata (its
    role's credentials come from there, as on AWS), the address map where the nodes see
    it, the SSH source rule and the timescale; no credentials."""
    from clusterkit.aws.identity import OVERRIDE_ENV

    env = os.environ if env is None else env
    missing = [name for name in ("AWS_ENDPOINT_URL", METADATA_URL_ENV, NODE_ADDRESS_MAP_ENV,
                                 OVERRIDE_ENV) if not env.get(name)]
    if missing:
        raise SandboxError(f"sandbox mode without the sandbox's configuration (no "
                           f"{', '.join(missing)} here)",
                           "run clusterkit with --sandbox (or CLUSTERKIT_SANDBOX=1): it "
                           "reads the running sandbox's configuration")
    values = {SANDBOX_ENV: "1", "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"],
              "AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata_url(instance_id, env) + "/",
              METADATA_URL_ENV: env[METADATA_URL_ENV],
              ADDRESS_MAP_ENV: env[NODE_ADDRESS_MAP_ENV],
              OVERRIDE_ENV: env[OVERRIDE_ENV]}
    if env.get(TIME_SCALE_ENV):
        values[TIME_SCALE_ENV] = env[TIME_SCALE_ENV]
    return values
