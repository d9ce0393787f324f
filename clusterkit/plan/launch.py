"""One gang launch as data: the offer, the slots, the tags, the client token and the
typed block devices (the dataset clone made with each node). ``aws.instances`` turns it
into RunInstances' arguments; nothing above ``aws/`` builds a boto3 dict. PURE."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from clusterkit.catalog.instances import EfaInterface
from clusterkit.catalog.ranking import Offer
from clusterkit.kinds import Market
from clusterkit.plan.autostop import SHUTDOWN_TAG, behaviour_for
from clusterkit.plan.dataset import CLONE_OF_TAG, DEVICE_HINT
from clusterkit.plan.network import MASTER, efa_interfaces
from clusterkit.plan.nodes import (
    BLOCK_END_TAG,
    CLUSTER_TAG,
    PRICE_TAG,
    format_slots,
    launch_tags,
    standby_tags,
)
from clusterkit.plan.reservation import iso
from clusterkit.spec.model import Spec


@dataclass(frozen=True)
class BlockDevice:
    """An EBS volume made with the instance (and deleted with it)."""

    device: str
    snapshot_id: str
    volume_type: str
    size_gib: int | None = None  # None: the snapshot's size
    iops: int | None = None
    throughput: int | None = None  # MiB/s
    initialization_rate: int | None = None  # MiB/s, the clone's provisioned hydration
    encrypted: bool = True
    delete_on_termination: bool = True


@dataclass(frozen=True)
class LaunchRequest:
    """All ``len(slots)`` nodes of one RunInstances call, in one AZ, or none."""

    offer: Offer
    slots: tuple[int, ...]
    max_price: float | None
    client_token: str
    tags: Mapping[str, str] = field(default_factory=dict)  # the instances'
    volume_tags: Mapping[str, str] = field(default_factory=dict)  # volumes', spot requests'
    block_devices: tuple[BlockDevice, ...] = ()
    # what the instances do when their OS shuts down (autostop); None: EC2's default
    shutdown_behavior: str | None = None
    # public keys authorized at first boot beside the key pair's (cloud-config user data):
    # the master's recovery controller's, on the nodes it launches
    authorized_keys: tuple[str, ...] = ()
    # every EFA interface of the type (network.efa): the instances launch with these
    # network interfaces, in the cluster's subnet and security group
    efa: tuple[EfaInterface, ...] = ()
    # nodes.capacity_reservation: the reservation (cr-…) or resource group (ARN) the
    # instances launch into; a capacity-block offer's market puts them in the block
    capacity_reservation: str | None = None

    @property
    def count(self) -> int:
        return len(self.slots)

    @property
    def public_address(self) -> bool:
        """The master needs an Elastic IP: EC2 gives no public IP to an instance
        launched with more than one network interface, and you reach the cluster
        through the master."""
        return len(self.efa) > 1 and MASTER in self.slots

    @property
    def market(self) -> Market:
        return self.offer.market


def base_tags(spec: Spec) -> dict[str, str]:
    """The tags every resource of the cluster carries."""
    return {**dict(spec.tags), CLUSTER_TAG: spec.name}


def dataset_devices(spec: Spec, size_gib: int | None) -> tuple[BlockDevice, ...]:
    """The clone of ``storage.dataset.snapshot`` each node is launched with (none without
    a snapshot); ``size_gib`` None: the snapshot's size."""
    ds = spec.storage.dataset
    if ds is None or not ds.snapshot:
        return ()
    return (BlockDevice(DEVICE_HINT, ds.snapshot, ds.volume_type, size_gib or None,
                        ds.iops or None, ds.throughput or None,
                        ds.initialization_rate or None),)


def client_token(stack_id: str, slots: Sequence[int], offer: Offer, salt: str = "") -> str:
    """Same stack + same slots + same offer => same token, so a retried RunInstances is
    not a second launch. A new stack (after `down`) gives new tokens; ``salt`` sets a
    launch apart from the one with the same slots (a standby: the node it stands by)."""
    text = f"{stack_id}|{format_slots(slots)}|{offer.instance_type}|{offer.az}|{offer.market}"
    text += f"|{salt}" if salt else ""
    return "ck-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def launch_parts(spec: Spec, offer: Offer, slots: Sequence[int],
                 ) -> list[tuple[Offer, tuple[int, ...]]]:
    """The RunInstances calls of a launch of ``slots`` at ``offer``: one, or the master
    first in its own market (same type and AZ, at that market's price), then the rest."""
    other = spec.nodes.master_apart(offer.market)
    if other is None or 0 not in slots:
        return [(offer, tuple(slots))]
    on_demand = other == Market.ON_DEMAND
    master = replace(offer, market=Market(other),
                     price=offer.on_demand_price if on_demand else None)
    rest = tuple(s for s in slots if s != 0)
    return [(master, (0,))] + ([(offer, rest)] if rest else [])


def cloud_config(authorized_keys: Sequence[str]) -> str:
    """The user data that authorizes ``authorized_keys`` at first boot (cloud-init's
    ``ssh_authorized_keys``): public keys only, nothing secret."""
    for key in authorized_keys:
        if not re.fullmatch(r"ssh-[a-z0-9-]+ [A-Za-z0-9+/=]+( [^\n]*)?", key):
            raise ValueError(f"not an OpenSSH public key line: {key[:40]!r}")
    lines = ["#cloud-config", "ssh_authorized_keys:"]
    return "\n".join(lines + [f"  - {key}" for key in authorized_keys]) + "\n"


def authorized_keys_of(user_data: str) -> list[str]:
    """The keys ``cloud_config`` wrote (the sandbox's first boot honours them)."""
    if not user_data.startswith("#cloud-config"):
        return []
    keys, inside = [], False
    for line in user_data.splitlines()[1:]:
        if not line.startswith(" "):
            inside = line.strip() == "ssh_authorized_keys:"
        elif inside and line.strip().startswith("- "):
            keys.append(line.strip()[2:].strip())
    return keys


def launch_request(spec: Spec, offer: Offer, slots: Sequence[int], stack_id: str,
                   standby_of: str = "", authorized_keys: Sequence[str] = ()) -> LaunchRequest:
    """The launch of ``slots`` at ``offer``: identity tags on instances and volumes, the
    price it was launched at, the clone's snapshot on its volumes. ``standby_of``: the
    instance id of the one node (``slots``) this launch makes a standby for;
    ``authorized_keys``: public keys the nodes authorize at first boot."""
    devices = dataset_devices(spec, spec.storage.dataset.size_gb if spec.storage.dataset
                              else None)
    identity = standby_tags(spec.name, slots[0]) if standby_of else launch_tags(spec.name,
                                                                               slots)
    volume_tags = {**base_tags(spec), **identity}
    if devices:  # every volume of the launch alike; only the clone's SnapshotId matches
        volume_tags[CLONE_OF_TAG] = devices[0].snapshot_id
    tags = dict(volume_tags)
    if offer.price is not None:
        tags[PRICE_TAG] = f"{offer.price:.4f}"
    if offer.block_end is not None:  # `status` says when the block ends, `train` acts on it
        tags[BLOCK_END_TAG] = iso(offer.block_end)
    behaviour = None
    if spec.autostop is not None and spec.autostop.on:  # an idle node's OS shuts it down
        behaviour = behaviour_for(offer.market, spec.autostop.action)
        tags[SHUTDOWN_TAG] = behaviour
    return LaunchRequest(offer, tuple(slots), spec.nodes.max_price,
                         client_token(stack_id, slots, offer, standby_of), tags,
                         volume_tags, devices,
                         shutdown_behavior=behaviour,
                         authorized_keys=tuple(authorized_keys),
                         efa=efa_interfaces(spec, offer.instance_type),
                         capacity_reservation=spec.nodes.capacity_reservation)
