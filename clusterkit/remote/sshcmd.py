"""The system ``ssh`` command line for a node: agent forwarded (``-A``), host key checked
strictly against the cluster's known_hosts, workers through the master (``-J``).

OpenSSH applies ``-o``/``-i``/``-p`` to the destination only; the ``-J`` hop is a
separate ``ssh`` process that inherits just ``-F``. So for a worker clusterkit also
passes ``-F`` with a small per-cluster config (``ssh_config`` next to ``known_hosts``)
that carries the same checks to the gateway hop and then includes ``~/.ssh/config``.

Values from a spec or an option never become a directive: whatever the schema already
checked, a value with a quote, backslash, ``$``, ``%`` or a control character is refused
here again before it reaches the config or the command line (in ssh_config, a quote and
a newline in ``IdentityFile`` would add ``Match exec "…"``, a command ``ssh -F`` runs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from clusterkit import statedir
from clusterkit.errors import UsageError
from clusterkit.netguard import check_address
from clusterkit.remote import known_hosts
from clusterkit.remote.connect import Hop, Login, require_recorded
from clusterkit.spec.keys import USER_RE, bad_char

# ssh_config's quoting (" and \), its expansions (${VAR}, %-tokens) and -i's %-tokens.
_CONFIG_SPECIAL = re.compile(r'["\\$%]')


def config_path(cluster: str) -> Path:
    return known_hosts.cluster_dir(cluster) / "ssh_config"


def config_value(what: str, value: str) -> str:
    """``value`` when it can stand as one quoted ssh_config argument (and one ``-i``
    argument); else UsageError naming ``what`` and the character."""
    bad = bad_char(value)
    special = _CONFIG_SPECIAL.search(value)
    if bad is None and special is None and not value.startswith("-"):
        return value
    why = (bad[1] if bad is not None else repr(special.group()) if special is not None
           else "a leading -")
    raise UsageError(f"refusing {what} {value!r}: it contains {why}, which ssh would read "
                     "as more than a file name",
                     "use a path of plain characters (spaces are fine; no quotes, "
                     "backslashes, $, % or control characters)")


def check_user(user: str) -> str:
    """``user`` when it is a Unix user name (USER_RE); else UsageError."""
    if not re.fullmatch(USER_RE, user):
        raise UsageError(f"refusing login user {user!r}: not a Unix user name",
                         "lowercase letters, digits, _ and -, starting with a letter or _")
    return user


def _identity(login: Login) -> str | None:
    if not login.identity_file:
        return None
    what = "ssh.identity_file (or --identity-file)"
    return config_value(what, os.path.expanduser(config_value(what, login.identity_file)))


def write_config(login: Login) -> Path:
    """The per-cluster ssh config the ``-J`` hop reads (first value wins in OpenSSH, so
    these come before the user's own config)."""
    known = config_value("known_hosts path", str(login.known_hosts))
    lines = ["# written by clusterkit: the checks `clusterkit ssh` applies, for the -J hop",
             "Host *",
             f'    UserKnownHostsFile "{known}"',
             "    StrictHostKeyChecking yes"]
    identity = _identity(login)
    if identity:
        lines.append(f'    IdentityFile "{identity}"')
    lines.append("    Include ~/.ssh/config")
    path = config_path(login.cluster)
    statedir.ensure_cluster_dir(login.cluster)
    statedir.write_private(path, "\n".join(lines) + "\n")
    return path


def ssh_argv(login: Login, hop: Hop, *, via: Hop | None = None,
             command: Sequence[str] = (), config: Path | None = None) -> list[str]:
    """The ``ssh`` argv for ``hop`` (through ``via`` when given)."""
    user = check_user(login.user)
    known = config_value("known_hosts path", str(login.known_hosts))
    # ssh reads an -o value as a config line: quoted, a path with a space stays one file
    known = f'"{known}"' if any(c.isspace() for c in known) else known
    argv = ["ssh", "-A", "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes"]
    if login.port != 22:
        argv += ["-p", str(login.port)]
    identity = _identity(login)
    if identity:
        argv += ["-i", identity]
    if via is not None:
        if config is not None:
            argv += ["-F", str(config)]
        port = "" if login.port == 22 else f":{login.port}"
        argv += ["-J", f"{user}@{via.address}{port}"]
    return [*argv, "--", f"{user}@{hop.address}", *command]


def prepare(login: Login, hop: Hop, via: Hop | None = None,
            command: Sequence[str] = ()) -> list[str]:
    """Check the addresses and recorded host keys, write the -J config; the argv."""
    route = [each for each in (via, hop) if each is not None]
    for each in route:
        check_address(each.address, purpose="SSH")
    for each in route:
        require_recorded(login, each)
    config = write_config(login) if via is not None else None
    return ssh_argv(login, hop, via=via, command=command, config=config)
