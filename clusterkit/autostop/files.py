"""What the client ships to a node for autostop, and the commands that run it there:
the watchdog's files (``clusterkit.node.bundle.WATCHDOG``) into ``paths.AUTOSTOP_DIR``
with the node's config, as one tar on the SSH session's stdin (its token is never on a
command line; the caller packs ``entries`` with ``remote.archive``), unpacked and started
as root (``sudo -n`` for a non-root login)."""

from __future__ import annotations

import json
import secrets
import shlex

from clusterkit.node import autostop_policy as policy
from clusterkit.node import bundle, paths

NODE_DIR = paths.AUTOSTOP_DIR
NEW_CONFIG = "autostop.json.new"
_AS_ROOT = 'ck_root=; [ "$(id -u)" -eq 0 ] || ck_root="sudo -n"; '


def new_token() -> str:
    """The shared secret of one install (every node of the cluster gets the same)."""
    return secrets.token_hex(32)


def entries(cfg: policy.Config) -> list[tuple[str, bytes, int]]:
    """The watchdog's files (0644) and the node's config (0600): the tar's entries."""
    found = [(name, text.encode(), 0o644)
             for name, text in bundle.files(bundle.WATCHDOG).items()]
    found.append((NEW_CONFIG, json.dumps(cfg.to_dict(), sort_keys=True).encode(), 0o600))
    return found


def _as_root(script: str) -> str:
    return f"{_AS_ROOT}$ck_root sh -c {shlex.quote(script)}"


def install_command() -> str:
    """Unpack stdin's tar into NODE_DIR and ``ensure``: prints one JSON line."""
    d = shlex.quote(NODE_DIR)
    return _as_root(f"set -e; umask 022; mkdir -p {d}; tar -x -C {d} --no-same-owner -f -; "
                    f"exec python3 {d}/watchdog.py ensure {d}/{NEW_CONFIG}")


def off_command() -> str:
    """Stop the watchdog and remove its config (nothing to do where none was installed)."""
    d = shlex.quote(NODE_DIR)
    return _as_root(f"if [ -f {d}/watchdog.py ]; then exec python3 {d}/watchdog.py off; "
                    "else echo '{\"off\": true, \"was_on\": false}'; fi")


def status_command() -> str:
    """The master's clock as JSON (``{"installed": false}`` where none was installed)."""
    d = shlex.quote(NODE_DIR)
    return _as_root(f"if [ -f {d}/watchdog.py ]; then exec python3 {d}/watchdog.py status; "
                    "else echo '{\"installed\": false}'; fi")


def last_json(stdout: str) -> dict | None:
    """The last line of ``stdout`` that is a JSON object (what the verbs print)."""
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None
