"""The sandbox's credentials: made at each start of its daemon, known to its endpoint only
while that daemon lives, and handed to clusterkit as a file.

At start the daemon makes one long-term key (``AKIA`` + 16 characters, a 40-character
secret, both from ``secrets``) and writes it, with a config file, into ``auth/`` of the
state dir (the directory 0700, the files 0600, each written whole under a temporary name
made 0600 before a byte is written). ``mode.json`` names the two files; clusterkit points
``AWS_SHARED_CREDENTIALS_FILE`` and ``AWS_CONFIG_FILE`` at them (``clusterkit.sandboxmode``).

Why a file and not ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in the environment: a
process environment is inherited by every child (ssh, the sandbox's own node processes,
whatever a playbook starts), is kept for the whole life of each, and on this machine is
read from ``/proc/PID/environ`` by anyone with that process's uid or by root, which each
sandbox node is. A file is read once by botocore when a client is made, stays behind its
directory's mode, and its name (all that the environment carries) is no secret. The
config file beside it replaces the user's ``~/.aws/config`` in sandbox mode: a
``[default]`` profile there with SSO, ``role_arn`` or ``credential_process`` comes before
a credentials file in botocore's chain and would otherwise sign with the user's real
credentials. The secret is never on a command line or in the daemon's log (its key id
is logged where a request is refused, as AWS's CloudTrail names key ids).

The instances' role credentials (``imds.py``) are temporary keys (``ASIA``...) the daemon
registers here as it hands them out, each naming its instance and role, valid for six
hours and only with their session token. A restarted daemon knows none of the keys of the
one before it.
"""

from __future__ import annotations

import configparser
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AUTH_DIR = "auth"  # in the state dir, 0700
CREDENTIALS_FILE = "credentials"  # in AUTH_DIR, 0600: [default] key id and secret
CONFIG_FILE = "config"  # in AUTH_DIR, 0600: [default], so no profile of the user's applies
PROFILE = "default"
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # AWS's key ids: base32 characters
ROOT_PRINCIPAL = "sandbox-user"  # who signs with the per-start key


def _key_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice(KEY_ALPHABET) for _ in range(16))


def _secret() -> str:
    return secrets.token_urlsafe(30)  # 40 characters, as AWS's secret access keys


@dataclass(frozen=True)
class Key:
    """One access key the endpoint accepts."""

    key_id: str
    secret: str
    principal: str  # who signs with it: ROOT_PRINCIPAL or "role/NAME@i-..."
    token: str | None = None  # a temporary key's session token (required with it)
    expires: float | None = None  # a temporary key's end (epoch seconds)


class Keys:
    """The keys this daemon accepts: its per-start key and the temporary keys its IMDS
    handed out. Thread-safe (the endpoint serves requests on many threads)."""

    def __init__(self, root: Key | None = None) -> None:
        self.root = root or Key(_key_id("AKIA"), _secret(), ROOT_PRINCIPAL)
        self._temporary: dict[str, Key] = {}
        self._lock = threading.Lock()

    def find(self, key_id: str) -> Key | None:
        if key_id == self.root.key_id:
            return self.root
        with self._lock:
            return self._temporary.get(key_id)

    def temporary(self, principal: str, ttl: float, now: float | None = None) -> Key:
        """A fresh temporary key for ``principal``, accepted until ``ttl`` s from now."""
        now = time.time() if now is None else now
        key = Key(_key_id("ASIA"), _secret(), principal, secrets.token_urlsafe(60), now + ttl)
        with self._lock:
            for old in [k for k, v in self._temporary.items() if (v.expires or 0) < now]:
                del self._temporary[old]  # expired: refused anyway, forgotten
            self._temporary[key.key_id] = key
        return key


def auth_dir(state_dir: Path) -> Path:
    return state_dir / AUTH_DIR


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, mode 0600 from its first byte, replaced whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def write(state_dir: Path, keys: Keys) -> tuple[Path, Path]:
    """The per-start key's credentials file and a config file of no profile of the
    user's, in ``auth/`` (0700, made again if anything else had it); their paths."""
    where = auth_dir(state_dir)
    where.mkdir(mode=0o700, exist_ok=True)
    if where.is_symlink() or not where.is_dir():
        raise RuntimeError(f"{where} is not a directory of the sandbox's")
    os.chmod(where, 0o700)
    creds = configparser.ConfigParser()
    creds[PROFILE] = {"aws_access_key_id": keys.root.key_id,
                      "aws_secret_access_key": keys.root.secret}
    _write_private(where / CREDENTIALS_FILE, _text(creds))
    config = configparser.ConfigParser()
    config[PROFILE] = {}
    _write_private(where / CONFIG_FILE, _text(config))
    return where / CREDENTIALS_FILE, where / CONFIG_FILE


def _text(parser: configparser.ConfigParser) -> str:
    import io

    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def read(state_dir: Path) -> tuple[str, str]:
    """(key id, secret) of the running sandbox in ``state_dir``; FileNotFoundError or
    KeyError when it has none."""
    parser = configparser.ConfigParser()
    path = auth_dir(state_dir) / CREDENTIALS_FILE
    with open(path) as handle:
        parser.read_file(handle)
    section = parser[PROFILE]
    return section["aws_access_key_id"], section["aws_secret_access_key"]


def remove(state_dir: Path) -> None:
    """The credentials of a daemon that stopped: no file names keys no one accepts."""
    for name in (CREDENTIALS_FILE, CONFIG_FILE):
        (auth_dir(state_dir) / name).unlink(missing_ok=True)


def client(state_dir: Path, service: str, endpoint: str, region: str = "us-east-1",
           **kwargs: Any) -> Any:
    """A boto3 client on the sandbox's ``endpoint``, signing with its credentials (the
    sandbox's own commands and the tests' set-up and inspection)."""
    import boto3

    key_id, secret = read(state_dir)
    return boto3.client(service, endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=key_id, aws_secret_access_key=secret, **kwargs)
