"""Host keys per instance, for `up` (its SSH probe), `exec` and `ssh`: a node whose
instance id is new gets its key recorded; the same instance id presenting a different
key is refused, with both fingerprints, unless the user accepts it for that one node
(``--accept-new-host-key NODE``). A first key is pinned only if the instance's console
shows it (``firstcontact``): a console showing no key pins nothing, unless the user
accepts that node's key the same way. The known_hosts file the SSH clients check is
written from these records for the nodes' current addresses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterkit.cluster.access import firstcontact
from clusterkit.cluster.access.firstcontact import ConsoleReader
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, RemoteError
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts, selection
from clusterkit.remote.address import ssh_address
from clusterkit.remote.probe import presented_keys


def addresses(nodes: Sequence[Node]) -> dict[str, str]:
    """{address: instance id} for every address a node is dialled at (directly, and by
    the master for workers); addresses the address hook refuses are left out."""
    out: dict[str, str] = {}
    for node in nodes:
        for via in (False, True):
            try:
                out[ssh_address(node, via_gateway=via)] = node.instance_id
            except ClusterkitError:
                continue
    return out


def accepted_ids(nodes: Sequence[Node], accept: Sequence[str]) -> set[str]:
    """The instance ids the ``--accept-new-host-key`` selectors name (UsageError for a
    selector that names no node)."""
    return {n.instance_id for n in selection.select(nodes, accept)} if accept else set()


def pinned_keys(cluster: str, nodes: Sequence[Node], fresh: Sequence[Node],
                accept: Sequence[str] = ()) -> dict[str, str]:
    """{instance id: recorded key} of the nodes whose SSH answer needs no key exchange:
    a key is recorded for the instance, it is not in ``fresh`` (launched by this `up`)
    and not named by ``accept``. Their first real connection checks the key strictly."""
    recorded = known_hosts.instance_keys(cluster)
    skip = accepted_ids(nodes, accept) | {n.instance_id for n in fresh}
    return {n.instance_id: recorded[n.instance_id] for n in nodes
            if n.instance_id in recorded and n.instance_id not in skip}


def check_and_record(rt: Runtime, cluster: str, nodes: Sequence[Node],
                     presented: Mapping[str, str], *, port: int = 22,
                     accept: Sequence[str] = (),
                     console: ConsoleReader | None = None) -> None:
    """Record the keys of new instances that their console confirms (and, with a
    warning, of accepted new ones whose console shows none) and of accepted nodes,
    refresh known_hosts, then refuse (RemoteError, exit 1) any new instance whose console
    shows other keys or none, and any other instance whose key changed (both
    fingerprints). ``console``: how to read a node's console (default: AWS)."""
    labels = selection.labels(nodes)
    allowed = accepted_ids(nodes, accept)
    recorded = known_hosts.instance_keys(cluster)
    changed = known_hosts.changes(cluster, presented, labels)
    refused = [c for c in changed if c.instance_id not in allowed]
    first = {i: k for i, k in presented.items() if i not in recorded}
    unpinned = firstcontact.verify(rt, nodes, first, labels, console, accepted=allowed)
    blocked = {c.instance_id for c in refused} | {m.instance_id for m in unpinned}
    known_hosts.record_instances(cluster, {i: k for i, k in presented.items()
                                           if i not in blocked})
    for change in changed:
        if change.instance_id in allowed:
            rt.warn(f"accepted the new host key of {change.describe()}")
    known_hosts.sync(cluster, addresses(nodes), port)
    if unpinned:
        raise firstcontact.refusal_error(unpinned)
    if refused:
        raise known_hosts.changed_error(refused)


def prepare(rt: Runtime, cluster: str, nodes: Sequence[Node], route: Sequence[Node], *,
            port: int, accept: Sequence[str] = (), timeout: float = 5.0,
            first_contact: bool = False) -> None:
    """Before `exec` / `ssh` dial: accept the new keys of the nodes named by ``accept``
    (probed now), check the nodes of ``route`` (the ones `ssh` dials; `exec` leaves it
    empty and lets the SSH client refuse), and write known_hosts for every node.
    ``first_contact`` (the job commands): in a cluster this machine has reached before,
    an instance with no key recorded here (the master's recovery controller launched it)
    is probed and its key recorded when its console shows it, as `up` records the nodes
    it launched."""
    allowed = accepted_ids(nodes, accept)
    recorded = known_hosts.instance_keys(cluster)
    known = first_contact and any(n.instance_id in recorded for n in nodes)
    new = {n.instance_id for n in nodes if known and n.instance_id not in recorded}
    check = [n for n in nodes if n.instance_id in allowed | new or n in route]
    presented = presented_keys(check, port, timeout) if check else {}
    missing = [n for n in nodes if n.instance_id in allowed and n.instance_id not in presented]
    if missing:
        names = ", ".join(selection.labels(nodes)[n.instance_id] for n in missing)
        raise RemoteError(f"cannot read the host key of {names} to accept it: no SSH answer",
                          "is the node running? `clusterkit status`")
    presented = {i: k for i, k in presented.items()  # another new id: `up` records it
                 if i in recorded or i in allowed or i in new}
    check_and_record(rt, cluster, nodes, presented, port=port, accept=accept)
