"""EC2 instance verbs: one RunInstances per gang launch, describe by tag, tag, terminate,
the spot requests / fleets that may belong to a cluster, and an instance's console output
(where cloud-init prints its SSH host keys)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter, tag_specs, to_dict, to_list
from clusterkit.kinds import Market
from clusterkit.plan.launch import BlockDevice, LaunchRequest, cloud_config
from clusterkit.plan.nodes import LIVE_STATES, PRICE_TAG, Node, node_index

if TYPE_CHECKING:
    import boto3

# DescribeInstances' InstanceLifecycle -> the market the instance bills in (none: on-demand)
LIFECYCLE_MARKETS = {"spot": Market.SPOT, "capacity-block": Market.CAPACITY_BLOCK}


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def to_node(raw: Mapping[str, Any], region: str) -> Node:
    """The one place a DescribeInstances / RunInstances dict becomes a ``Node``."""
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
        market=LIFECYCLE_MARKETS.get(raw.get("InstanceLifecycle") or "", Market.ON_DEMAND),
        region=region,
        launch_time=launch.isoformat() if hasattr(launch, "isoformat") else str(launch or ""),
        public_ip=raw.get("PublicIpAddress"), private_ip=raw.get("PrivateIpAddress"),
        subnet_id=raw.get("SubnetId"), price=price, tags=tags,
        image_id=raw.get("ImageId", ""), launch_index=raw.get("AmiLaunchIndex"),
        volume_ids=tuple(m["Ebs"]["VolumeId"] for m in raw.get("BlockDeviceMappings", ())
                         if m.get("Ebs", {}).get("VolumeId")),
        instance_profile=raw.get("IamInstanceProfile", {}).get("Arn"),
        primary_interface=primary_interface(raw))


def primary_interface(raw: Mapping[str, Any]) -> str | None:
    """The id of the instance's primary network interface (card 0, device 0)."""
    for eni in raw.get("NetworkInterfaces") or ():
        attachment = eni.get("Attachment") or {}
        if attachment.get("DeviceIndex", 0) == 0 and attachment.get("NetworkCardIndex", 0) == 0:
            return eni.get("NetworkInterfaceId")
    return None


def _block_device(device: BlockDevice) -> dict[str, Any]:
    ebs: dict[str, Any] = {"SnapshotId": device.snapshot_id, "VolumeType": device.volume_type,
                           "DeleteOnTermination": device.delete_on_termination,
                           "Encrypted": device.encrypted}
    for key, value in (("VolumeSize", device.size_gib), ("Iops", device.iops),
                       ("Throughput", device.throughput),
                       ("VolumeInitializationRate", device.initialization_rate)):
        if value:
            ebs[key] = value
    return {"DeviceName": device.device, "Ebs": ebs}


def network_interfaces(request: LaunchRequest, subnet_id: str,
                       security_group: str) -> list[dict[str, Any]]:
    """RunInstances' NetworkInterfaces for the request's EFA interfaces: each on its
    network card, in the subnet and security group, deleted with the instance. A single
    one asks for a public IP (as the default subnet would give); EC2 refuses that with
    several (the master then gets an Elastic IP: ``aws.addresses``)."""
    single = len(request.efa) == 1
    return [{"NetworkCardIndex": i.card, "DeviceIndex": i.device,
             "InterfaceType": i.kind.value, "SubnetId": subnet_id,
             "Groups": [security_group], "DeleteOnTermination": True,
             **({"AssociatePublicIpAddress": True} if single else {})}
            for i in request.efa]


def _network(request: LaunchRequest, subnet_id: str, security_group: str) -> dict[str, Any]:
    """Where the instances go: their EFA interfaces, else the subnet and security group
    (the launch template has no security group: EC2 refuses one there beside network
    interfaces given here)."""
    if request.efa:
        return {"NetworkInterfaces": network_interfaces(request, subnet_id, security_group)}
    return {"SubnetId": subnet_id,
            **({"SecurityGroupIds": [security_group]} if security_group else {})}


def reservation_options(request: LaunchRequest) -> dict[str, Any]:
    """RunInstances' CapacityReservationSpecification for the request's reservation (an
    id, or a resource group's ARN), and for a block its market type; {} for neither."""
    target = request.capacity_reservation
    if not target:
        return {}
    key = "CapacityReservationId" if target.startswith("cr-") else \
        "CapacityReservationResourceGroupArn"
    out: dict[str, Any] = {"CapacityReservationSpecification": {
        "CapacityReservationTarget": {key: target}}}
    if request.market == Market.CAPACITY_BLOCK:
        out["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return out


def run_instances(session: boto3.Session, region: str, request: LaunchRequest, *,
                  launch_template_id: str, subnet_id: str, security_group: str = "",
                  placement_group: str = "", metadata_hops: int = 1) -> list[Node]:
    """All ``request.count`` instances or none (MinCount = MaxCount): EC2 itself is
    all-or-nothing. IMDSv2 is asked for in the request too, as the launch template has
    it (``metadata_hops``: its hop limit): the recovery controller's role launches only
    with ec2:MetadataHttpTokens required, which then need not come from the template."""
    offer, count = request.offer, request.count
    az = offer.az or ""
    kwargs: dict[str, Any] = {
        "MinCount": count, "MaxCount": count, "InstanceType": offer.instance_type,
        "LaunchTemplate": {"LaunchTemplateId": launch_template_id, "Version": "$Latest"},
        "Placement": {"AvailabilityZone": az}, **_network(request, subnet_id, security_group),
        "ClientToken": request.client_token,
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled",
                            "HttpPutResponseHopLimit": metadata_hops},
        # network interfaces tagged too: the recovery controller may create only
        # what carries the cluster's tag (aws:RequestTag in its role)
        "TagSpecifications": tag_specs(["instance"], request.tags)
        + tag_specs(["volume", "network-interface"], request.volume_tags),
    }
    if request.shutdown_behavior:  # autostop: what the OS's shutdown does to the instance
        kwargs["InstanceInitiatedShutdownBehavior"] = request.shutdown_behavior
    if request.authorized_keys:  # boto3 base64-encodes it
        kwargs["UserData"] = cloud_config(request.authorized_keys)
    kwargs.update(reservation_options(request))
    if request.block_devices:  # added to the launch template's (a device it does not have)
        kwargs["BlockDeviceMappings"] = [_block_device(b) for b in request.block_devices]
    if placement_group:  # repeated here: a Placement given to RunInstances replaces the LT's
        kwargs["Placement"]["GroupName"] = placement_group
    if offer.market == Market.SPOT:
        options: dict[str, Any] = {"SpotInstanceType": "one-time",
                                   "InstanceInterruptionBehavior": "terminate"}
        if request.max_price is not None:
            options["MaxPrice"] = f"{request.max_price:.4f}"
        kwargs["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
        kwargs["TagSpecifications"] += tag_specs(["spot-instances-request"],
                                                 request.volume_tags)
    if not kwargs["TagSpecifications"]:  # no tags at all: no empty list either
        del kwargs["TagSpecifications"]
    with aws_call("RunInstances", f"{count} x {offer.instance_type} {offer.market} in {az}"):
        raw = _ec2(session, region).run_instances(**kwargs)["Instances"]
    return [to_node(r, region) for r in raw]


def _find(session: boto3.Session, region: str, filters: list[dict[str, Any]],
          what: str) -> list[Node]:
    with aws_call("DescribeInstances", what):
        pages = _ec2(session, region).get_paginator("describe_instances").paginate(
            Filters=filters)
        raw = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    return [to_node(r, region) for r in raw]


def cluster_instances(session: boto3.Session, region: str, cluster: str,
                      states: Sequence[str] = LIVE_STATES) -> list[Node]:
    filters = cluster_filter(cluster) + [{"Name": "instance-state-name",
                                          "Values": list(states)}]
    return _find(session, region, filters, cluster)


def ended(session: boto3.Session, region: str, cluster: str) -> dict[str, tuple[str, str]]:
    """instance id -> (state, EC2's state reason code) of the cluster's instances that
    are stopped or terminated (EC2 lists terminated ones for about an hour)."""
    filters = cluster_filter(cluster) + [{"Name": "instance-state-name", "Values": [
        "stopping", "stopped", "shutting-down", "terminated"]}]
    with aws_call("DescribeInstances", cluster):
        pages = _ec2(session, region).get_paginator("describe_instances").paginate(
            Filters=filters)
        raw = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    return {i["InstanceId"]: (i.get("State", {}).get("Name", ""),
                              (i.get("StateReason") or {}).get("Code", "")) for i in raw}


def tagged_instances(session: boto3.Session, region: str, tag_key: str,
                     states: Sequence[str] = LIVE_STATES) -> list[Node]:
    """Live instances carrying ``tag_key`` with any value (every cluster)."""
    filters = [{"Name": "tag-key", "Values": [tag_key]},
               {"Name": "instance-state-name", "Values": list(states)}]
    return _find(session, region, filters, tag_key)


def describe_nodes(session: boto3.Session, region: str, ids: Sequence[str]) -> list[Node]:
    if not ids:
        return []
    # InvalidInstanceID.NotFound: eventual consistency, just after RunInstances
    with aws_call("DescribeInstances", ",".join(ids),
                  expected={"InvalidInstanceID.NotFound"}) as call:
        pages = _ec2(session, region).get_paginator("describe_instances").paginate(
            InstanceIds=list(ids))
        raw = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    if call.expected_error:
        return []
    return [to_node(r, region) for r in raw]


def create_tags(session: boto3.Session, region: str, resource_ids: Sequence[str],
                tags: Mapping[str, str]) -> None:
    with aws_call("CreateTags", ",".join(resource_ids)):
        _ec2(session, region).create_tags(Resources=list(resource_ids), Tags=to_list(tags))


def delete_tags(session: boto3.Session, region: str, resource_ids: Sequence[str],
                keys: Sequence[str]) -> None:
    with aws_call("DeleteTags", ",".join(resource_ids)):
        _ec2(session, region).delete_tags(Resources=list(resource_ids),
                                          Tags=[{"Key": k} for k in keys])


def associate_instance_profile(session: boto3.Session, region: str, instance_id: str,
                               profile_arn: str) -> None:
    """Give a running instance its IAM instance profile (its role's credentials appear in
    its instance metadata seconds later)."""
    with aws_call("AssociateIamInstanceProfile", instance_id):
        _ec2(session, region).associate_iam_instance_profile(
            IamInstanceProfile={"Arn": profile_arn}, InstanceId=instance_id)


def try_associate_instance_profile(session: boto3.Session, region: str, instance_id: str,
                                   profile_arn: str) -> bool:
    """``associate_instance_profile``, False while EC2 does not know the profile yet (IAM's
    propagation of a profile made seconds ago: InvalidParameterValue, "Invalid IAM
    Instance Profile"), for the caller to try again."""
    with aws_call("AssociateIamInstanceProfile", instance_id, expected=("InvalidParameterValue",),
                  message="Invalid IAM Instance Profile") as call:
        _ec2(session, region).associate_iam_instance_profile(
            IamInstanceProfile={"Arn": profile_arn}, InstanceId=instance_id)
    return call.expected_error is None


def set_instance_profile(session: boto3.Session, region: str, instance_id: str,
                         profile_arn: str) -> bool:
    """Make ``profile_arn`` the instance's IAM instance profile: associated when it has
    none, its association replaced (never a moment without one) when it has another,
    nothing when it has it already. True when something changed."""
    ec2 = _ec2(session, region)
    with aws_call("DescribeIamInstanceProfileAssociations", instance_id):
        found = ec2.describe_iam_instance_profile_associations(Filters=[
            {"Name": "instance-id", "Values": [instance_id]},
            {"Name": "state", "Values": ["associating", "associated"]},
        ])["IamInstanceProfileAssociations"]
    if not found:
        associate_instance_profile(session, region, instance_id, profile_arn)
        return True
    current = found[0]
    if current.get("IamInstanceProfile", {}).get("Arn") == profile_arn:
        return False
    with aws_call("ReplaceIamInstanceProfileAssociation", instance_id):
        ec2.replace_iam_instance_profile_association(
            IamInstanceProfile={"Arn": profile_arn}, AssociationId=current["AssociationId"])
    return True


def _on_instances(session: boto3.Session, region: str, ids: Sequence[str], operation: str,
                  method: str) -> None:
    """EC2's ``operation``, the client's ``method`` (named as written, so that
    scripts/iam_policy.py finds it), on the instances ``ids``; no call without any."""
    if not ids:
        return
    with aws_call(operation, ",".join(ids)):
        getattr(_ec2(session, region), method)(InstanceIds=list(ids))


def terminate_instances(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    _on_instances(session, region, ids, "TerminateInstances", "terminate_instances")


def set_shutdown_behavior(session: boto3.Session, region: str, instance_id: str,
                          behaviour: str) -> None:
    """What the instance does when its OS shuts down: ``stop`` or ``terminate`` (EC2's
    ModifyInstanceAttribute takes one instance at a time)."""
    with aws_call("ModifyInstanceAttribute", f"{instance_id} on shutdown: {behaviour}"):
        _ec2(session, region).modify_instance_attribute(
            InstanceId=instance_id, InstanceInitiatedShutdownBehavior={"Value": behaviour})


def start_instances(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    """Start stopped instances (EBS-backed; their instance-store disks come back empty)."""
    _on_instances(session, region, ids, "StartInstances", "start_instances")


def cluster_spot_requests(session: boto3.Session, region: str, cluster: str,
                          instance_ids: Sequence[str] = ()) -> list[str]:
    """Open or active spot requests tagged with the cluster or serving its instances."""
    ec2 = _ec2(session, region)
    state = [{"Name": "state", "Values": ["open", "active"]}]
    with aws_call("DescribeSpotInstanceRequests", cluster):
        found = ec2.describe_spot_instance_requests(
            Filters=cluster_filter(cluster) + state)["SpotInstanceRequests"]
        if instance_ids:
            found += ec2.describe_spot_instance_requests(
                Filters=state + [{"Name": "instance-id", "Values": list(instance_ids)}]
            )["SpotInstanceRequests"]
    return sorted({r["SpotInstanceRequestId"] for r in found})


def cancel_spot_requests(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    with aws_call("CancelSpotInstanceRequests", ",".join(ids)):
        _ec2(session, region).cancel_spot_instance_requests(SpotInstanceRequestIds=list(ids))


def cluster_fleets(session: boto3.Session, region: str, cluster: str) -> list[str]:
    """EC2 fleets tagged with the cluster that are not deleted yet."""
    with aws_call("DescribeFleets", cluster):
        fleets = _ec2(session, region).describe_fleets(Filters=[
            {"Name": "fleet-state", "Values": ["submitted", "active", "modifying"]}])["Fleets"]
    return sorted(f["FleetId"] for f in fleets
                  if to_dict(f.get("Tags")).get("clusterkit:cluster") == cluster)


def delete_fleets(session: boto3.Session, region: str, ids: Sequence[str]) -> None:
    with aws_call("DeleteFleets", ",".join(ids)):
        _ec2(session, region).delete_fleets(FleetIds=list(ids), TerminateInstances=True)


# what GetConsoleOutput answers Latest=True on an instance without a live console (Xen)
LATEST_REFUSED = ("UnsupportedOperation", "InvalidParameterValue", "InvalidParameterCombination")


def console_output(session: boto3.Session, region: str, instance_id: str) -> str:
    """The instance's console output as text ("" while AWS has posted none): the latest
    (``Latest``, Nitro instances), else the last snapshot AWS took of it. AWS sends it
    base64-encoded; botocore decodes it (``decode_console_output``)."""
    ec2 = _ec2(session, region)
    with aws_call("GetConsoleOutput", instance_id, expected=LATEST_REFUSED) as call:
        raw = ec2.get_console_output(InstanceId=instance_id, Latest=True)
    if call.expected_error:  # not a Nitro instance: no live console, the posted one
        with aws_call("GetConsoleOutput", instance_id):
            raw = ec2.get_console_output(InstanceId=instance_id)
    return str(raw.get("Output") or "")
