"""EBS volumes tagged with a cluster (root volumes left behind, dataset clones)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter, tag_specs, to_dict
from clusterkit.plan.dataset import CLONE_OF_TAG, NODE_INDEX_TAG, Clone, Snapshot, is_clone

if TYPE_CHECKING:
    import boto3

DESCRIBE_BATCH = 200  # volume ids per DescribeVolumes call


def cluster_volumes(session: boto3.Session, region: str, cluster: str) -> list[dict[str, Any]]:
    """[{id, state, attached_to, size_gib, type}] of every volume tagged with the
    cluster."""
    with aws_call("DescribeVolumes", cluster):
        pages = client(session, "ec2", region).get_paginator("describe_volumes").paginate(
            Filters=cluster_filter(cluster))
        vols = [v for page in pages for v in page["Volumes"]]
    return [{"id": v["VolumeId"], "state": v["State"],
             "attached_to": [a["InstanceId"] for a in v.get("Attachments", [])
                             if a.get("State") in ("attaching", "attached")],
             "size_gib": int(v.get("Size") or 0), "type": v.get("VolumeType", "")}
            for v in vols]


def detach_volume(session: boto3.Session, region: str, volume_id: str,
                  instance_id: str | None = None) -> None:
    """``instance_id``: the instance it is attached to (AWS may do without; the emulator
    needs it)."""
    extra = {"InstanceId": instance_id} if instance_id else {}
    with aws_call("DetachVolume", volume_id, expected={"IncorrectState"}):
        client(session, "ec2", region).detach_volume(VolumeId=volume_id, Force=True, **extra)


def delete_volume(session: boto3.Session, region: str, volume_id: str) -> bool:
    """False when the volume is already gone."""
    with aws_call("DeleteVolume", volume_id, expected={"InvalidVolume.NotFound"}) as call:
        client(session, "ec2", region).delete_volume(VolumeId=volume_id)
    return call.expected_error is None


# -- dataset snapshots and clones -----------------------------------------------------------

def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def to_snapshot(raw: Mapping[str, Any], region: str) -> Snapshot:
    return Snapshot(snapshot_id=raw["SnapshotId"], region=region,
                    state=raw.get("State", "unknown"), size_gib=int(raw.get("VolumeSize") or 0),
                    progress=raw.get("Progress", ""), tags=to_dict(raw.get("Tags")))


def describe_snapshot(session: boto3.Session, region: str, snapshot_id: str) -> Snapshot | None:
    """The snapshot in ``region``, or None when that region has no snapshot of that id."""
    with aws_call("DescribeSnapshots", snapshot_id,
                  expected={"InvalidSnapshot.NotFound", "InvalidSnapshotID.Malformed"}) as call:
        found = _ec2(session, region).describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    if call.expected_error or not found:
        return None
    return to_snapshot(found[0], region)


def to_clone(raw: Mapping[str, Any]) -> Clone:
    tags = to_dict(raw.get("Tags"))
    live = [a for a in raw.get("Attachments", []) if a.get("State") in ("attaching", "attached")]
    try:
        index = int(tags[NODE_INDEX_TAG]) if NODE_INDEX_TAG in tags else None
    except ValueError:
        index = None
    return Clone(volume_id=raw["VolumeId"], snapshot_id=raw.get("SnapshotId") or "",
                 az=raw.get("AvailabilityZone", ""), state=raw.get("State", ""),
                 size_gib=int(raw.get("Size") or 0),
                 instance_id=live[0]["InstanceId"] if live else None,
                 device=live[0].get("Device") if live else None, node_index=index, tags=tags,
                 delete_on_termination=live[0].get("DeleteOnTermination") if live else None)


def dataset_clones(session: boto3.Session, region: str, cluster: str) -> list[Clone]:
    """The cluster's dataset volumes (plan.dataset's rule: tagged with the cluster, and
    the clone tag naming the volume's own snapshot), deleted ones left out."""
    with aws_call("DescribeVolumes", cluster):
        pages = _ec2(session, region).get_paginator("describe_volumes").paginate(
            Filters=cluster_filter(cluster) + [{"Name": "tag-key", "Values": [CLONE_OF_TAG]}])
        vols = [v for page in pages for v in page["Volumes"]]
    clones = [to_clone(v) for v in vols]
    return sorted((c for c in clones if is_clone(c.tags, c.snapshot_id)
                   and c.state not in ("deleting", "deleted")), key=lambda c: c.volume_id)


def describe_clones(session: boto3.Session, region: str, ids: Sequence[str]) -> list[Clone]:
    """The volumes of ``ids``, DESCRIBE_BATCH ids a call; none of a batch when one of its
    ids is not found (yet: a new volume may take a moment to show)."""
    out: list[Clone] = []
    for at in range(0, len(ids), DESCRIBE_BATCH):
        batch = list(ids[at:at + DESCRIBE_BATCH])
        with aws_call("DescribeVolumes", ",".join(batch), expected={"InvalidVolume.NotFound"}):
            out += [to_clone(v) for v in _ec2(session, region).describe_volumes(
                VolumeIds=batch)["Volumes"]]
    return out


def create_clone(session: boto3.Session, region: str, *, az: str, snapshot_id: str,
                 size_gib: int, volume_type: str, iops: int | None, throughput: int | None,
                 initialization_rate: int | None, tags: Mapping[str, str],
                 client_token: str, kms_key: str | None = None) -> str:
    """One encrypted volume from the snapshot in ``az`` (with ``kms_key``, else the
    default EBS key); its id. ``client_token``: the same token again returns the same
    volume (a retried call is not a second volume)."""
    kwargs: dict[str, Any] = {
        "AvailabilityZone": az, "SnapshotId": snapshot_id, "Size": size_gib,
        "VolumeType": volume_type, "Encrypted": True, "ClientToken": client_token,
        "TagSpecifications": tag_specs(["volume"], tags)}
    if kms_key:
        kwargs["KmsKeyId"] = kms_key
    if iops:
        kwargs["Iops"] = iops
    if throughput:
        kwargs["Throughput"] = throughput
    if initialization_rate:
        kwargs["VolumeInitializationRate"] = initialization_rate
    with aws_call("CreateVolume", f"{snapshot_id} in {az}"):
        return str(_ec2(session, region).create_volume(**kwargs)["VolumeId"])


def attach_volume(session: boto3.Session, region: str, volume_id: str, instance_id: str,
                  device: str) -> None:
    """``device`` is a hint only: the node shows the volume under its id (by-id link)."""
    with aws_call("AttachVolume", f"{volume_id} to {instance_id}"):
        _ec2(session, region).attach_volume(VolumeId=volume_id, InstanceId=instance_id,
                                            Device=device)


def delete_on_termination(session: boto3.Session, region: str, instance_id: str,
                          device: str) -> None:
    """Terminating the instance deletes the volume attached at ``device`` too."""
    with aws_call("ModifyInstanceAttribute", f"{instance_id} {device}"):
        _ec2(session, region).modify_instance_attribute(
            InstanceId=instance_id,
            BlockDeviceMappings=[{"DeviceName": device, "Ebs": {"DeleteOnTermination": True}}])


def initialization(session: boto3.Session, region: str,
                   ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{volume id: {progress, eta_s, type}} for the volumes AWS reports initialization
    details of (none in the emulator); a volume it does not report is left out."""
    if not ids:
        return {}
    with aws_call("DescribeVolumeStatus", ",".join(ids), expected={"InvalidVolume.NotFound"}):
        pages = _ec2(session, region).get_paginator("describe_volume_status").paginate(
            VolumeIds=list(ids))
        found = [s for page in pages for s in page.get("VolumeStatuses", [])]
        out: dict[str, dict[str, Any]] = {}
        for status in found:
            detail = status.get("InitializationStatusDetails") or {}
            if detail.get("Progress") is not None:
                out[status["VolumeId"]] = {
                    "progress": detail["Progress"], "type": detail.get("InitializationType"),
                    "eta_s": detail.get("EstimatedTimeToCompleteInSeconds")}
        return out
    return {}
