"""The one address hook: which address to SSH to for an EC2 instance.

``ssh_address(instance)`` takes a DescribeInstances instance dict and returns
its ``PublicIpAddress``, else its ``PrivateIpAddress``. If ``CLUSTERKIT_ADDRESS_MAP``
names a JSON file ``{instance_id: address}`` (the sandbox writes one and
``--sandbox`` sets the variable) the address there wins; an entry
``{"address": ..., "not_emulated": why}`` (a node the sandbox cannot run on this
machine) raises ``NotEmulated``. Every answer passes
the net guard, so in sandbox mode a fake public IP is refused, never dialled.

``ssh_address(instance, via_gateway=True)`` is the address the *gateway* (the master,
index 0) dials to reach the node: the map entry if the map has one (in the sandbox
every node is on loopback), else the ``PrivateIpAddress`` (nodes talk inside the VPC;
workers have no route from your machine). The cluster's known_hosts records each
node's key under both addresses, so either hop is checked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from clusterkit.errors import NotEmulated, RemoteError, SandboxError
from clusterkit.netguard import check_address

ADDRESS_MAP_ENV = "CLUSTERKIT_ADDRESS_MAP"


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


def ssh_address(instance: Mapping[str, Any], *, via_gateway: bool = False) -> str:
    """The address to SSH to for ``instance`` (a DescribeInstances dict); with
    ``via_gateway`` the one the master dials (map entry, else private IP)."""
    instance_id = instance.get("InstanceId", "")
    mapped = _mapped(instance_id)
    if via_gateway:
        address = mapped or instance.get("PrivateIpAddress")
    else:
        address = mapped or instance.get("PublicIpAddress") or instance.get("PrivateIpAddress")
    if not address:
        raise RemoteError(f"instance {instance_id or '?'} has no address to SSH to",
                           "is it running? (public IP, private IP or sandbox address)")
    check_address(address, purpose="SSH")
    return address
