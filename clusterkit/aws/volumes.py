"""EBS volumes tagged with a cluster (root volumes left behind, dataset clones)."""

from __future__ import annotations

from typing import Any

import boto3

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import AWS_EXCEPTIONS, error_code, translate
from clusterkit.aws.tags import cluster_filter


def cluster_volumes(session: boto3.Session, region: str, cluster: str) -> list[dict[str, Any]]:
    """[{id, state, attached_to}] of every volume tagged with the cluster."""
    try:
        pages = client(session, "ec2", region).get_paginator("describe_volumes").paginate(
            Filters=cluster_filter(cluster))
        vols = [v for page in pages for v in page["Volumes"]]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeVolumes", cluster) from exc
    return [{"id": v["VolumeId"], "state": v["State"],
             "attached_to": [a["InstanceId"] for a in v.get("Attachments", [])
                             if a.get("State") in ("attaching", "attached")]}
            for v in vols]


def detach_volume(session: boto3.Session, region: str, volume_id: str) -> None:
    try:
        client(session, "ec2", region).detach_volume(VolumeId=volume_id, Force=True)
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "IncorrectState":
            return
        raise translate(exc, "DetachVolume", volume_id) from exc


def delete_volume(session: boto3.Session, region: str, volume_id: str) -> bool:
    """False when the volume is already gone."""
    try:
        client(session, "ec2", region).delete_volume(VolumeId=volume_id)
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "InvalidVolume.NotFound":
            return False
        raise translate(exc, "DeleteVolume", volume_id) from exc
    return True
