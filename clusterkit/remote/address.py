"""The one address hook: which address to SSH to for a cluster node.

``ssh_address(node)`` takes a ``Node`` (plan/nodes.py) and returns its public IP, else
its private IP. If ``CLUSTERKIT_ADDRESS_MAP``
names a JSON file ``{instance_id: address}`` (the sandbox writes one and
``--sandbox`` sets the variable) the address there wins; an entry
``{"address": ..., "not_emulated": why}`` (a node the sandbox cannot run on this
machine) raises ``NotEmulated``. Every answer passes
the net guard, so in sandbox mode a fake public IP is refused, never dialled.

``ssh_address(node, via_gateway=True)`` is the address the *gateway* (the master,
index 0) dials to reach the node: the map entry if the map has one (in the sandbox
every node is on loopback), else the private IP (nodes talk inside the VPC; workers
have no route from your machine). The cluster's known_hosts records each node's key
under both addresses, so either hop is checked.

The address is resolved when a node is dialled, not stored on the ``Node``: the
sandbox maps an address only once the node has booted. ``targets`` is where each node
of a fan-out is dialled: the master directly, the workers through it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from clusterkit.errors import ClusterkitError, NotEmulated, RemoteError, SandboxError
from clusterkit.kinds import InstanceState
from clusterkit.netguard import check_address
from clusterkit.plan.nodes import Node
from clusterkit.remote import selection
from clusterkit.remote.connect import Hop, Target
from clusterkit.remote.incluster import controller_key
from clusterkit.sandboxmode import ADDRESS_MAP_ENV


def _mapped(instance_id: str) -> str | None:
    path = os.environ.get(ADDRESS_MAP_ENV)
    if not path:
        return None
    try:
        with open(path) as handle:
            table = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise SandboxError(f"cannot read the address map {path}: {exc}",
                           f"unset {ADDRESS_MAP_ENV} or restart the sandbox") from exc
    entry = table.get(instance_id)
    if isinstance(entry, dict):  # {"address": ..., "not_emulated": why}
        raise NotEmulated(f"instance {instance_id}: {entry.get('not_emulated')}",
                          "run the sandbox as root (`sudo clusterkit sandbox start`); "
                          "`clusterkit sandbox status` lists what this machine cannot emulate")
    return entry


def ssh_address(node: Node, *, via_gateway: bool = False) -> str:
    """The address to SSH to for ``node``; with ``via_gateway`` the one the master
    dials (map entry, else private IP)."""
    mapped = _mapped(node.instance_id)
    if via_gateway:
        address = mapped or node.private_ip
    else:
        address = mapped or node.public_ip or node.private_ip
    if not address:
        raise RemoteError(f"instance {node.instance_id or '?'} has no address to SSH to",
                          "is it running? (public IP, private IP or sandbox address)")
    check_address(address, purpose="SSH")
    return address


def address_or_none(node: Node, *, via_gateway: bool = False) -> str | None:
    """``ssh_address``, or None where the address hook refuses it (sandbox mode without a
    sandbox address for this instance): for lists that show what they can."""
    try:
        return ssh_address(node, via_gateway=via_gateway)
    except ClusterkitError:
        return None


def targets(nodes: Sequence[Node], chosen: Sequence[Node]) -> list[Target]:
    """Where to dial each of ``chosen`` (some of the cluster's ``nodes``): the running
    master directly, every other node through it; from the master's controller, every
    node directly at its in-cluster address."""
    labels = selection.labels(nodes)
    if controller_key() is not None:  # on the master: every node directly, inside the VPC
        return [Target(n, Hop(labels[n.instance_id], ssh_address(n, via_gateway=True)))
                for n in chosen]
    master = selection.gateway([n for n in nodes if n.state == InstanceState.RUNNING])
    via = Hop(labels[master.instance_id], ssh_address(master)) if master else None
    out = []
    for node in chosen:
        label = labels[node.instance_id]
        if via is not None and node is master:
            out.append(Target(node, via))
        elif via is None:
            raise ClusterkitError(f"{label}: cluster has no running master (index 0) to "
                                  "reach it through", "`clusterkit up <spec>` replaces it")
        else:
            out.append(Target(node, Hop(label, ssh_address(node, via_gateway=True)), via))
    return out
