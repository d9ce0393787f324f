"""The cluster in the user's own ``ssh``: one ssh_config file of host entries per
cluster (``<state>/clusters/NAME/ssh_hosts``), written by `up` and removed by `down`, so
``ssh NAME`` reaches the master and ``ssh NAME-worker-1`` a worker through it
(``ProxyJump NAME``), as SkyPilot's ``ssh mycluster`` does.

Each entry carries what `clusterkit ssh` passes on its command line: the login user and
port, the cluster's pinned known_hosts with ``StrictHostKeyChecking yes``, the agent
forwarded (``ForwardAgent yes``), and ``IdentityFile`` only where the spec names one (the
user's own key file, by its path: no key is ever copied). clusterkit never edits
``~/.ssh/config``: one ``Include`` line there (``include_line``, at the top, before any
``Host``), added by the user once, takes in every cluster's file through a glob.

Values from a spec never become a directive: each goes through ``sshcmd.config_value``
/ ``check_user`` (a quote or newline in a value would add lines to the config)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterkit import statedir
from clusterkit.remote import known_hosts
from clusterkit.remote.connect import Login
from clusterkit.remote.sshcmd import check_user, config_value

FILE = "ssh_hosts"


@dataclass(frozen=True)
class HostEntry:
    """One ``Host`` block: the name ``ssh`` is given, the address it dials (for a worker:
    the one the master dials), and the entry it jumps through (None: directly)."""

    alias: str
    address: str
    jump: str | None = None


def entries(cluster: str, master: str, workers: Sequence[tuple[int, str]]) -> list[HostEntry]:
    """PURE. ``NAME`` at the master's address, ``NAME-worker-N`` at each worker's
    address as the master dials it (``workers``: (index, address)), through ``NAME``."""
    return [HostEntry(cluster, master),
            *(HostEntry(f"{cluster}-worker-{index}", address, cluster)
              for index, address in sorted(workers))]


def _quoted(what: str, value: str) -> str:
    return f'"{config_value(what, value)}"'


def text(login: Login, hosts: Sequence[HostEntry]) -> str:
    """The file's text: a block per entry, every value checked first."""
    user = check_user(login.user)
    known = _quoted("known_hosts path", str(login.known_hosts))
    identity = login.identity_file and _quoted(
        "ssh.identity_file", os.path.expanduser(config_value("ssh.identity_file",
                                                             login.identity_file)))
    lines = [f"# written by `clusterkit up` for cluster {login.cluster}; removed by "
             f"`clusterkit down {login.cluster}`",
             f"# taken in by this line at the top of ~/.ssh/config: {include_line()}"]
    for host in hosts:
        lines += ["", f"Host {config_value('host name', host.alias)}",
                  f"    HostName {config_value('node address', host.address)}",
                  f"    User {user}", f"    Port {int(login.port)}",
                  f"    UserKnownHostsFile {known}", "    StrictHostKeyChecking yes",
                  "    ForwardAgent yes"]
        lines += [f"    IdentityFile {identity}"] if identity else []
        lines += [f"    ProxyJump {config_value('host name', host.jump)}"] if host.jump else []
    return "\n".join(lines) + "\n"


def path(cluster: str) -> Path:
    return known_hosts.cluster_dir(cluster) / FILE


def write(login: Login, hosts: Sequence[HostEntry]) -> Path:
    """The cluster's file written whole (0600, temp file and rename)."""
    body = text(login, hosts)
    statedir.ensure_cluster_dir(login.cluster)
    target = path(login.cluster)
    statedir.write_private(target, body)
    return target


def remove(cluster: str) -> bool:
    """Delete the cluster's file (True if there was one)."""
    target = path(cluster)
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
        return True
    return False


def include_line() -> str:
    """The one line for ~/.ssh/config that takes in every cluster's file: an absolute
    glob (OpenSSH expands ``~`` to the passwd entry's home, which need not be $HOME)."""
    value = config_value("state directory", str(statedir.clusters_dir() / "*" / FILE))
    return f'Include "{value}"' if any(c.isspace() for c in value) else f"Include {value}"


def included(config: Path | None = None) -> bool:
    """Whether the user's ssh config (~/.ssh/config) already has ``include_line``."""
    config = config or Path.home() / ".ssh" / "config"
    try:
        lines = config.read_text(errors="replace").splitlines()
    except OSError:
        return False
    want = include_line().split()
    return any(line.split() == want for line in lines)
