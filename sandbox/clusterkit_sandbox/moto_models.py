"""The one place clusterkit reads moto's in-process EC2 models: what the node agent needs
to know about the emulator's instances, volumes and snapshots.

Why not the AWS API the emulator serves: the agent ticks every 0.1 s and must see every
account and region that holds anything; over HTTP that would be a DescribeInstances,
DescribeKeyPairs, DescribeVolumes and DescribeSnapshots per region per tick (about 30
regions), against the very server the commands under test are talking to. In process it
is a few dictionary reads.

Only public names of moto's models are used (``all_instances()``, ``Instance.state``,
``tags``, ``key_pairs``, ``volumes``, ``snapshots``, ``INSTANCE_TYPES``; never an
underscore attribute). moto gives these no stability promise: a moto upgrade that breaks
the sandbox breaks here, and nowhere else.

The timed sandbox's writes are here too (the states AWS shows for a while: an instance
pending, a volume creating or attaching, a snapshot pending, EFS creating) and its reads
and writes of a CloudFormation stack (template, conditions, one resource at a time,
events).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from clusterkit.plan.launch import authorized_keys_of
from clusterkit.plan.nodes import node_index
from clusterkit_sandbox.disks import VolumeView

CLUSTER_TAG = "clusterkit:cluster"


@dataclass
class InstanceView:
    instance_id: str
    state: str
    cluster: str
    hostname: str
    public_keys: list[str]
    instance_store_gb: list[int]
    region: str
    index: int | None = None  # the node's index (its tags, else its launch's slots)
    role: str | None = None  # ARN of its instance profile (its role's credentials in IMDS)
    image_id: str = ""  # the AMI it was launched from


def instance_store(instance_type: str) -> list[int]:
    """Sizes (GB) of the type's instance-store disks, from moto's instance type table."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    info = INSTANCE_TYPES.get(instance_type, {}).get("InstanceStorageInfo") or {}
    sizes: list[int] = []
    for disk in info.get("Disks", []):
        sizes += [int(disk.get("SizeInGB", 1))] * int(disk.get("Count", 1))
    return sizes


def _backends() -> list[tuple[str, Any]]:
    """(region, EC2 backend) of every account and region moto holds."""
    from moto.backends import get_backend

    found = []
    for account in list(get_backend("ec2").values()):
        for region, backend in list(account.items()):
            found.append((region, backend))
    return found


def _user_data_keys(inst: Any) -> list[str]:
    """The public keys a cloud-config in the instance's user data authorizes (cloud-init
    does that at first boot on EC2)."""
    data = getattr(inst, "user_data", None)
    data = data[0] if isinstance(data, list) and data else data  # older moto: a list
    try:
        text = data.decode() if hasattr(data, "decode") else ""
    except (ValueError, UnicodeDecodeError):
        return []
    return authorized_keys_of(text)


def _view(backend: Any, inst: Any, region: str) -> InstanceView | None:
    tags = backend.tags.get(inst.id, {})
    if CLUSTER_TAG not in tags:
        return None
    pair = backend.key_pairs.get(inst.key_name) if inst.key_name else None
    keys = [pair.material_public.decode()] if pair is not None else []
    keys += _user_data_keys(inst)
    host = "ip-" + (inst.private_ip or "10.0.0.1").replace(".", "-")
    association = backend.iam_instance_profile_associations.get(inst.id)
    role = getattr(getattr(association, "iam_instance_profile", None), "arn", None)
    return InstanceView(inst.id, inst.state, tags[CLUSTER_TAG], host, keys,
                        instance_store(inst.instance_type), region,
                        node_index(tags, getattr(inst, "ami_launch_index", None)), role,
                        getattr(inst, "image_id", "") or "")


def instance_metadata(instance_id: str) -> dict[str, Any] | None:
    """What an instance's metadata says of it: its identity document's fields and its
    instance profile's role (None: no profile); None when moto holds no such instance."""
    for region, backend in _backends():
        for inst in backend.all_instances():
            if inst.id != instance_id:
                continue
            association = backend.iam_instance_profile_associations.get(inst.id)
            profile = getattr(association, "iam_instance_profile", None)
            roles = list(getattr(profile, "roles", None) or [])
            return {"instanceId": inst.id, "region": region,
                    "availabilityZone": getattr(inst.placement, "zone", None),
                    "instanceType": inst.instance_type,
                    "imageId": inst.image_id, "privateIp": inst.private_ip,
                    "accountId": backend.account_id, "architecture": "x86_64",
                    "version": "2017-09-30",
                    "pendingTime": str(getattr(inst, "launch_time", "")),
                    "role": roles[0].name if roles else None}
    return None


def end_instance(instance_id: str, action: str) -> bool:
    """Stop (``action`` "stop") or terminate the instance, as EC2 does when a spot
    interruption notice's time comes; False when no backend holds it."""
    for _region, backend in _backends():
        if instance_id in {i.id for i in backend.all_instances()}:
            if action == "stop":
                backend.stop_instances([instance_id])
            else:
                backend.terminate_instances([instance_id])
            return True
    return False


OS_SHUTDOWN = ("Client.InstanceInitiatedShutdown: Instance initiated shutdown",
               "Client.InstanceInitiatedShutdown")


def shut_down_by_os(instance_id: str) -> str | None:
    """The instance's OS powered off: stop or terminate it as its
    InstanceInitiatedShutdownBehavior says (a spot instance always terminates), with the
    state reason EC2 gives; what it did, or None when no backend holds it running."""
    from moto.ec2.models.instances import StateReason

    for _region, backend in _backends():
        inst = next((i for i in backend.all_instances() if i.id == instance_id), None)
        if inst is None or inst.state != "running":
            continue
        behaviour = getattr(inst, "instance_initiated_shutdown_behavior", "stop") or "stop"
        if behaviour == "stop" and getattr(inst, "lifecycle", None) != "spot":
            backend.stop_instances([instance_id])
        else:
            behaviour = "terminate"
            backend.terminate_instances([instance_id])
        inst.state_reason = StateReason(*OS_SHUTDOWN)
        return behaviour
    return None


def read_instances(finished: Container[str] = ()) -> tuple[
        list[InstanceView], list[VolumeView], dict[str, str | None]]:
    """Tagged instances, non-root volume attachments, snapshots -> source volume.
    ``finished``: terminated instances the caller is done with, left out (moto keeps
    every terminated instance: read each time, they made the agent's tick grow with
    every instance the sandbox ever ran)."""
    views: list[InstanceView] = []
    volumes: list[VolumeView] = []
    snapshots: dict[str, str | None] = {}
    for region, backend in _backends():
        views += [v for inst in list(backend.all_instances())
                  if not (inst.id in finished and inst.state == "terminated")
                  and (v := _view(backend, inst, region)) is not None]
        for vol in list(backend.volumes.values()):
            att = vol.attachment
            iid = None
            if att is not None and att.device != getattr(att.instance, "root_device_name", ""):
                iid = att.instance.id
            volumes.append(VolumeView(vol.id, int(vol.size), vol.snapshot_id, iid))
        for snap in list(backend.snapshots.values()):
            snapshots[snap.id] = getattr(snap.volume, "id", None)
    return views, volumes, snapshots


def direct_snapshot_blocks(ebs_backend: Any, snapshot_id: str) -> tuple[int, dict[int, bytes]]:
    """(volume size in GiB, block index -> data) of a snapshot written through the EBS
    direct APIs (moto's ``ebs`` backend: ``snapshots``, ``volume_size``, ``blocks``,
    ``block_data``)."""
    snap = ebs_backend.snapshots[snapshot_id]
    return int(snap.volume_size), {int(i): b.block_data for i, b in list(snap.blocks.items())}


def direct_snapshot_ec2(ebs_backend: Any, snapshot_id: str) -> Any:
    """The EC2 snapshot model behind an EBS direct-API snapshot (``ec2_backend``,
    ``snapshots``), whose ``status`` and ``volume`` the sandbox's gap patch adjusts."""
    return ebs_backend.ec2_backend.snapshots[snapshot_id]


def set_instance_state(instance: Any, name: str, only_from: str | None = None) -> bool:
    """Put a moto instance in state ``name`` (the timed sandbox's pending -> running);
    with ``only_from``, only if it is in that state now (a terminated instance stays
    so). True when it changed. moto has no public setter: this is the one write of an
    underscore attribute (``_state``), kept here with the reads."""
    codes = {"pending": 0, "running": 16}
    state = instance._state
    if only_from is not None and state.name != only_from:
        return False
    state.name, state.code = name, codes[name]
    return True


# -- the timed sandbox's reads and writes (sandbox.timed*): states AWS shows for a while ----

_shown_volume_state: dict[str, str] = {}  # volume id -> the state shown instead of moto's
_volume_patch: dict[str, bool] = {"installed": False}


def _set(obj: Any, attr: str, name: str, only_from: str | None) -> bool:
    if obj is None or (only_from is not None and getattr(obj, attr) != only_from):
        return False
    setattr(obj, attr, name)
    return True


def set_snapshot_state(snapshot: Any, name: str, only_from: str | None = None) -> bool:
    """A snapshot's ``status`` (pending, completed); True when it changed."""
    return _set(snapshot, "status", name, only_from)


def set_attachment_state(volume: Any, name: str, only_from: str | None = None) -> bool:
    """The state of a volume's attachment (attaching, attached); False when detached."""
    return _set(volume.attachment, "status", name, only_from)


def set_lifecycle_state(efs_resource: Any, name: str, only_from: str | None = None) -> bool:
    """An EFS file system's or mount target's ``life_cycle_state``."""
    return _set(efs_resource, "life_cycle_state", name, only_from)


def set_volume_state(volume: Any, name: str | None) -> bool:
    """Show ``name`` as the volume's state (None: moto's own again, in-use or available:
    moto computes it and has no setter, so ``Volume.status`` is wrapped once to read this
    table first). True when it changed."""
    if not _volume_patch["installed"]:
        from moto.ec2.models.elastic_block_store import Volume

        own = Volume.status
        Volume.status = property(lambda self: _shown_volume_state.get(self.id) or own.fget(self))
        _volume_patch["installed"] = True
    if name is None:
        return _shown_volume_state.pop(volume.id, None) is not None
    _shown_volume_state[volume.id] = name
    return True


def unsettled_volume_ids() -> set[str]:
    """Volumes still ``creating``, or whose attachment is still ``attaching``: a node
    shows neither device yet."""
    found: set[str] = set()
    for _region, backend in _backends():
        for vol in list(backend.volumes.values()):
            att = vol.attachment
            if vol.status == "creating" or (att is not None and att.status == "attaching"):
                found.add(vol.id)
    return found


def launch_clones(instance: Any) -> list[Any]:
    """The volumes a launch made from snapshots, besides the root volume (moto's
    ``get_block_device_mapping``, ``root_device_name``, ``get_volume``)."""
    backend = instance.ec2_backend
    volumes = [backend.get_volume(bdt.volume_id)
               for device, bdt in instance.get_block_device_mapping
               if device != getattr(instance, "root_device_name", "")]
    return [vol for vol in volumes if vol.snapshot_id]


def stack_resources_json(stack: Any) -> dict[str, Any]:
    """A CloudFormation stack's ``Resources``, as moto parsed its template."""
    return dict((stack.template_dict or {}).get("Resources") or {})


def stack_condition(stack: Any, name: str) -> bool:
    """Whether the stack's condition ``name`` holds (moto's ``lazy_condition_map``)."""
    return bool(stack.resource_map.lazy_condition_map[name])


def make_stack_resource(stack: Any, logical_id: str) -> tuple[Any, str]:
    """Create one resource of the stack now (moto's lazy ``resource_map`` makes each once,
    what it refers to first); (the model, or None for a type moto skips; physical id)."""
    made = stack.resource_map[logical_id]
    return made, str(getattr(made, "physical_resource_id", "") or "")


def add_stack_event(stack: Any, logical_id: str, physical_id: str, resource_type: str,
                    status: str, reason: str | None = None) -> None:
    """One more event in DescribeStackEvents (moto's ``Event``, ``stack.events``)."""
    from moto.cloudformation.models import Event

    stack.events.append(Event(stack_id=stack.stack_id, stack_name=stack.name,
                              logical_resource_id=logical_id, physical_resource_id=physical_id,
                              resource_type=resource_type, resource_status=status,
                              resource_status_reason=reason, resource_properties=None))
