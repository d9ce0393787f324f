"""EBS volumes tagged with a cluster (root volumes left behind, dataset clones)."""

from __future__ import annotations

from typing import Any

import boto3

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter


def cluster_volumes(session: boto3.Session, region: str, cluster: str) -> list[dict[str, Any]]:
    """[{id, state, attached_to}] of every volume tagged with the cluster."""
    with aws_call("DescribeVolumes", cluster):
        pages = client(session, "ec2", region).get_paginator("describe_volumes").paginate(
            Filters=cluster_filter(cluster))
        vols = [v for page in pages for v in page["Volumes"]]
    return [{"id": v["VolumeId"], "state": v["State"],
             "attached_to": [a["InstanceId"] for a in v.get("Attachments", [])
                             if a.get("State") in ("attaching", "attached")]}
            for v in vols]


def detach_volume(session: boto3.Session, region: str, volume_id: str) -> None:
    with aws_call("DetachVolume", volume_id, expected={"IncorrectState"}):
        client(session, "ec2", region).detach_volume(VolumeId=volume_id, Force=True)


def delete_volume(session: boto3.Session, region: str, volume_id: str) -> bool:
    """False when the volume is already gone."""
    with aws_call("DeleteVolume", volume_id, expected={"InvalidVolume.NotFound"}) as call:
        client(session, "ec2", region).delete_volume(VolumeId=volume_id)
    return call.expected_error is None
