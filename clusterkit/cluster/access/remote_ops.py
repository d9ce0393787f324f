"""`clusterkit exec` and `clusterkit ssh`: the cluster's nodes from tags alone, the
master as the gateway to the workers, then Fabric fan-out or the system ``ssh``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TextIO

from clusterkit.cluster.access import hostkeys
from clusterkit.cluster.access.target import find_nodes, open_cluster
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.kinds import InstanceState
from clusterkit.plan.nodes import Node
from clusterkit.remote import fanout, selection, sshcmd
from clusterkit.remote.address import targets
from clusterkit.remote.connect import Login
from clusterkit.remote.incluster import controller_key
from clusterkit.remote.results import GroupResult
from clusterkit.spec.keys import LOCAL_FILE_RE, USER_RE
from clusterkit.spec.model import Spec, Ssh


def _ssh_settings(target: str, region: str | None) -> tuple[str, list[str], Ssh]:
    """NAME or spec file -> (cluster, regions, ssh settings: the spec's or the defaults)."""
    ref = open_cluster(target, region)
    return ref.name or target, list(ref.regions), ref.spec.ssh if ref.spec else Ssh()


def check_login_options(user: str | None, identity_file: str | None = None) -> None:
    """Refuse a ``--user`` or ``--identity-file`` the spec's ``ssh.user`` /
    ``ssh.identity_file`` would refuse (both reach ssh's command line and the cluster's
    ssh_config), before anything else runs: UsageError, exit 2."""
    if user is not None and not re.fullmatch(USER_RE, user):
        raise UsageError(f"--user {user!r} is not a Unix user name",
                         "a login user is lowercase letters, digits, _ and -, starting "
                         "with a letter or _, at most 32 characters (as ssh.user)")
    if identity_file is not None and not re.fullmatch(LOCAL_FILE_RE, identity_file):
        raise UsageError(f"--identity-file {identity_file!r} cannot be written into ssh's "
                         "config", "a key file path without quotes, $, `, \\, %, control "
                         "characters or a leading - (as ssh.identity_file)")


def login_for(target: str, region: str | None, *, user: str | None = None,
              port: int | None = None, identity_file: str | None = None,
              connect_timeout: float = 15.0, forward_agent: bool = False,
              ) -> tuple[Login, list[str]]:
    """How to log in to ``target``'s nodes: the options given, else the spec's ssh
    settings (on the master's controller, its own key); ``forward_agent`` only where the
    user asked for it (`exec -A`)."""
    check_login_options(user, identity_file)
    cluster, regions, ssh = _ssh_settings(target, region)
    return Login(cluster, user=user or ssh.user, port=port or ssh.port,
                 identity_file=identity_file or controller_key() or ssh.identity_file,
                 connect_timeout=connect_timeout, forward_agent=forward_agent), regions


def spec_login(spec: Spec) -> Login:
    """How clusterkit logs in to ``spec``'s nodes: the spec's ssh settings (on the master's
    controller, with its own key)."""
    return Login(spec.name, user=spec.ssh.user, port=spec.ssh.port,
                 identity_file=controller_key() or spec.ssh.identity_file)


def cluster_members(rt: Runtime, cluster: str, regions: Sequence[str]) -> list[Node]:
    """The cluster's live nodes (running or not), from its local record's region or a
    tag search (every enabled region when ``regions`` is empty); a standby is none of
    them until it is swapped in (``cluster/jobs/standby.py``). Empty when none is left;
    an AWS error raises (ClusterkitError)."""
    _, found = find_nodes(rt, cluster, regions)
    return [n for n in found if n.standby_for is None]


def cluster_nodes(rt: Runtime, cluster: str, regions: Sequence[str]) -> list[Node]:
    """``cluster_members``, refused (ClusterkitError) when there are none."""
    nodes = cluster_members(rt, cluster, regions)
    if not nodes:
        where = ", ".join(regions) if regions else "any enabled region"
        raise ClusterkitError(f"no cluster {cluster} in {where}",
                              "check the name and --region (or give the spec file); "
                              "`clusterkit status` lists clusters")
    return nodes


def require_running(nodes: Sequence[Node], chosen: Sequence[Node]) -> None:
    """Refuse, naming them, when any chosen node is not running."""
    labels = selection.labels(nodes)
    down = [n for n in chosen if n.state != InstanceState.RUNNING]
    if down:
        raise ClusterkitError(
            f"{len(down)} of the chosen node(s) not running: " + ", ".join(
                f"{labels[n.instance_id]} ({n.state})" for n in down),
            "`clusterkit up <spec>` starts stopped nodes; or choose running nodes with "
            "--node (`clusterkit status` shows each node's state)")


def _running(nodes: Sequence[Node]) -> list[Node]:
    return [n for n in nodes if n.state == InstanceState.RUNNING]


def do_exec(target: str, command: Sequence[str], *, nodes: Sequence[str] = (),
            accept_host_keys: Sequence[str] = (), region: str | None = None, profile: str | None = None, user: str | None = None,
            port: int | None = None, identity_file: str | None = None,
            timeout: float | None = None, connect_timeout: float = 15.0,
            forward_agent: bool = False,
            out: TextIO | None = None, rt: Runtime | None = None) -> GroupResult:
    """Run ``command`` (words joined by spaces, as ssh does) on the selected nodes at once;
    one NodeResult per node. Any failure raises one GroupError carrying every node's.
    A chosen node that is not running fails the command before anything runs.
    ``accept_host_keys``: nodes whose changed host key to accept (probed first).
    ``forward_agent``: forward the user's ssh-agent (only when asked: while the command
    runs, any process of the login user on the node could use it)."""
    rt = rt or Runtime.make(region=region, profile=profile)
    login, regions = login_for(target, region, user=user, port=port,
                               identity_file=identity_file, connect_timeout=connect_timeout,
                               forward_agent=forward_agent)
    found = cluster_nodes(rt, login.cluster, regions)
    chosen = selection.select(found, nodes)
    require_running(found, chosen)
    hostkeys.prepare(rt, login.cluster, _running(found), (), port=login.port,
                     accept=accept_host_keys, timeout=min(5.0, connect_timeout))
    return fanout.run_all(login, targets(found, chosen), " ".join(command),
                          timeout=timeout, out=out)


def do_ssh(target: str, node: str | None = None, command: Sequence[str] = (), *,
           accept_host_keys: Sequence[str] = (), region: str | None = None,
           profile: str | None = None, user: str | None = None, port: int | None = None, identity_file: str | None = None,
           rt: Runtime | None = None) -> list[str]:
    """The checked ``ssh`` argv for one node (default: the master); the CLI prints it or
    becomes it. The system ssh forwards the agent (``-A``): from an interactive shell on
    the master the user reaches the workers by name."""
    rt = rt or Runtime.make(region=region, profile=profile)
    login, regions = login_for(target, region, user=user, port=port,
                               identity_file=identity_file)
    found = cluster_nodes(rt, login.cluster, regions)
    chosen = selection.select_one(found, node)
    require_running(found, [chosen])
    (dial,) = targets(found, [chosen])
    master = selection.gateway(_running(found))
    route = [chosen, *([master] if dial.via is not None and master else [])]
    hostkeys.prepare(rt, login.cluster, _running(found), route, port=login.port,
                     accept=accept_host_keys)
    return sshcmd.prepare(login, dial.hop, dial.via, command)
