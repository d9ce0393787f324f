"""EC2 instance verbs: one RunInstances per gang launch, describe by tag, tag, terminate,
and the spot requests / fleets that may belong to a cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import boto3

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import AWS_EXCEPTIONS, error_code, translate
from clusterkit.aws.tags import cluster_filter, tag_specs, to_dict, to_list
from clusterkit.plan.nodes import LIVE_STATES, PRICE_TAG, Node, node_index


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def to_node(raw: Mapping[str, Any], region: str) -> Node:
    tags = to_dict(raw.get("Tags"))
    try:
        price = float(tags[PRICE_TAG]) if PRICE_TAG in tags else None
    except ValueError:
        price = None
    launch = raw.get("LaunchTime")
    return Node(
        instance_id=raw["InstanceId"],
        index=node_index(tags, raw.get("AmiLaunchIndex")),
        state=raw.get("State", {}).get("Name", "unknown"),
        instance_type=raw.get("InstanceType", ""),
        az=raw.get("Placement", {}).get("AvailabilityZone", ""),
        market="spot" if raw.get("InstanceLifecycle") == "spot" else "on-demand",
        region=region,
        launch_time=launch.isoformat() if hasattr(launch, "isoformat") else str(launch or ""),
        public_ip=raw.get("PublicIpAddress"), private_ip=raw.get("PrivateIpAddress"),
        subnet_id=raw.get("SubnetId"), price=price, tags=tags, raw=dict(raw))


def run_instances(session: boto3.Session, region: str, *, launch_template_id: str,
                  instance_type: str, az: str, subnet_id: str, market: str,
                  max_price: float | None, count: int, tags: Mapping[str, str],
                  volume_tags: Mapping[str, str], client_token: str,
                  placement_group: str = "") -> list[Node]:
    """All ``count`` instances or none (MinCount = MaxCount): EC2 itself is all-or-nothing."""
    kwargs: dict[str, Any] = {
        "MinCount": count, "MaxCount": count, "InstanceType": instance_type,
        "LaunchTemplate": {"LaunchTemplateId": launch_template_id, "Version": "$Latest"},
        "Placement": {"AvailabilityZone": az}, "SubnetId": subnet_id,
        "ClientToken": client_token,
        "TagSpecifications": tag_specs(["instance"], tags) + tag_specs(["volume"], volume_tags),
    }
    if placement_group:  # repeated here: a Placement given to RunInstances replaces the LT's
        kwargs["Placement"]["GroupName"] = placement_group
    if market == "spot":
        options: dict[str, Any] = {"SpotInstanceType": "one-time",
                                   "InstanceInterruptionBehavior": "terminate"}
        if max_price is not None:
            options["MaxPrice"] = f"{max_price:.4f}"
        kwargs["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
        kwargs["TagSpecifications"] += tag_specs(["spot-instances-request"], volume_tags)
    try:
        raw = _ec2(session, region).run_instances(**kwargs)["Instances"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "RunInstances",
                        f"{count} x {instance_type} {market} in {az}") from exc
    return [to_node(r, region) for r in raw]


def _find(session: boto3.Session, region: str, filters: list[dict[str, Any]],
          what: str) -> list[Node]:
    try:
        pages = _ec2(session, region).get_paginator("describe_instances").paginate(
            Filters=filters)
        raw = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeInstances", what) from exc
    return [to_node(r, region) for r in raw]


def cluster_instances(session: boto3.Session, region: str, cluster: str,
                      states: Sequence[str] = LIVE_STATES) -> list[Node]:
    filters = cluster_filter(cluster) + [{"Name": "instance-state-name",
                                          "Values": list(states)}]
    return _find(session, region, filters, cluster)


def tagged_instances(session: boto3.Session, region: str, tag_key: str,
                     states: Sequence[str] = LIVE_STATES) -> list[Node]:
    """Live instances carrying ``tag_key`` with any value (every cluster)."""
    filters = [{"Name": "tag-key", "Values": [tag_key]},
               {"Name": "instance-state-name", "Values": list(states)}]
    return _find(session, region, filters, tag_key)


def describe_nodes(session: boto3.Session, region: str, ids: Sequence[str]) -> list[Node]:
    if not ids:
        return []
    try:
        pages = _ec2(session, region).get_paginator("describe_instances").paginate(
            InstanceIds=list(ids))
        raw = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "InvalidInstanceID.NotFound":  # eventual consistency
            return []
        raise translate(exc, "DescribeInstances", ",".join(ids)) from exc
    return [to_node(r, region) for r in raw]


def create_tags(session: boto3.Session, region: str, resource_ids: Sequence[str],
                tags: Mapping[str, str]) -> None:
    try:
        _ec2(session, region).create_tags(Resources=list(resource_ids), Tags=to_list(tags))
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "CreateTags", ",".join(resource_ids)) from exc


def terminate_instances(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    if not ids:
        return
    try:
        _ec2(session, region).terminate_instances(InstanceIds=list(ids))
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "TerminateInstances", ",".join(ids)) from exc


def start_instances(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    """Start stopped instances (EBS-backed; their instance-store disks come back empty)."""
    if not ids:
        return
    try:
        _ec2(session, region).start_instances(InstanceIds=list(ids))
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "StartInstances", ",".join(ids)) from exc


def cluster_spot_requests(session: boto3.Session, region: str, cluster: str,
                          instance_ids: Sequence[str] = ()) -> list[str]:
    """Open or active spot requests tagged with the cluster or serving its instances."""
    ec2 = _ec2(session, region)
    state = [{"Name": "state", "Values": ["open", "active"]}]
    try:
        found = ec2.describe_spot_instance_requests(
            Filters=cluster_filter(cluster) + state)["SpotInstanceRequests"]
        if instance_ids:
            found += ec2.describe_spot_instance_requests(
                Filters=state + [{"Name": "instance-id", "Values": list(instance_ids)}]
            )["SpotInstanceRequests"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeSpotInstanceRequests", cluster) from exc
    return sorted({r["SpotInstanceRequestId"] for r in found})


def cancel_spot_requests(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    try:
        _ec2(session, region).cancel_spot_instance_requests(SpotInstanceRequestIds=list(ids))
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "CancelSpotInstanceRequests", ",".join(ids)) from exc


def cluster_fleets(session: boto3.Session, region: str, cluster: str) -> list[str]:
    """EC2 fleets tagged with the cluster that are not deleted yet."""
    try:
        fleets = _ec2(session, region).describe_fleets(Filters=[
            {"Name": "fleet-state", "Values": ["submitted", "active", "modifying"]}])["Fleets"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeFleets", cluster) from exc
    return sorted(f["FleetId"] for f in fleets
                  if to_dict(f.get("Tags")).get("clusterkit:cluster") == cluster)


def delete_fleets(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    try:
        _ec2(session, region).delete_fleets(FleetIds=list(ids), TerminateInstances=True)
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DeleteFleets", ",".join(ids)) from exc
