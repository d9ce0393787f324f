"""The system ``ssh`` command line for a node: agent forwarded (``-A``), host key checked
strictly against the cluster's known_hosts, workers through the master (``-J``).

OpenSSH applies ``-o``/``-i``/``-p`` to the destination only; the ``-J`` hop is a
separate ``ssh`` process that inherits just ``-F``. So for a worker clusterkit also
passes ``-F`` with a small per-cluster config (``ssh_config`` next to ``known_hosts``)
that carries the same checks to the gateway hop and then includes ``~/.ssh/config``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from clusterkit.errors import RemoteError
from clusterkit.netguard import check_address
from clusterkit.remote import known_hosts
from clusterkit.remote.connect import Hop, Login, require_recorded


def config_path(cluster: str) -> Path:
    return known_hosts.cluster_dir(cluster) / "ssh_config"


def write_config(login: Login) -> Path:
    """The per-cluster ssh config the ``-J`` hop reads (first value wins in OpenSSH, so
    these come before the user's own config)."""
    lines = ["# written by clusterkit: the checks `clusterkit ssh` applies, for the -J hop",
             "Host *",
             f'    UserKnownHostsFile "{login.known_hosts}"',
             "    StrictHostKeyChecking yes"]
    if login.identity_file:
        lines.append(f'    IdentityFile "{os.path.expanduser(login.identity_file)}"')
    lines.append("    Include ~/.ssh/config")
    path = config_path(login.cluster)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def ssh_argv(login: Login, hop: Hop, *, via: Hop | None = None,
             command: Sequence[str] = (), config: Path | None = None) -> list[str]:
    """The ``ssh`` argv for ``hop`` (through ``via`` when given)."""
    argv = ["ssh", "-A", "-o", f"UserKnownHostsFile={login.known_hosts}",
            "-o", "StrictHostKeyChecking=yes"]
    if login.port != 22:
        argv += ["-p", str(login.port)]
    if login.identity_file:
        argv += ["-i", os.path.expanduser(login.identity_file)]
    if via is not None:
        if config is not None:
            argv += ["-F", str(config)]
        port = "" if login.port == 22 else f":{login.port}"
        argv += ["-J", f"{login.user}@{via.address}{port}"]
    return [*argv, "--", f"{login.user}@{hop.address}", *command]


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


def exec_ssh(argv: Sequence[str]) -> None:
    """Replace this process with ``ssh`` (the terminal is the user's, signals too)."""
    if not shutil.which(argv[0]):
        raise RemoteError("no `ssh` command on this machine",
                          "install the OpenSSH client (package openssh-client)")
    os.execvp(argv[0], list(argv))
