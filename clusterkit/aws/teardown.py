"""Find and delete the static resources of a cluster outside its stack's own delete:
what a failed or half-deleted stack may leave. Each is found by the cluster tag; the
IAM role and instance profile (generated names; profiles cannot be tagged by
CloudFormation) by their IAM path ``/clusterkit/<cluster>/``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter, to_dict
from clusterkit.plan.nodes import CLUSTER_TAG, REGION_TAG, RETAIN_TAG

if TYPE_CHECKING:
    import boto3

GONE = frozenset({"InvalidGroup.NotFound", "InvalidLaunchTemplateId.NotFound",
                  "InvalidPlacementGroup.Unknown", "FileSystemNotFound", "MountTargetNotFound",
                  "NoSuchEntity", "InvalidLaunchTemplateId.Malformed"})


def _call(session: boto3.Session, service: str, region: str | None, op: str, what: str,
          **kwargs: Any) -> Any:
    """One call; a resource that is already gone counts as done (returns None)."""
    with aws_call(op, what, expected=GONE):
        return getattr(client(session, service, region), op)(**kwargs)
    return None


def _tagged(session: boto3.Session, region: str, cluster: str, op: str, key: str,
            field: str) -> list[str]:
    """The ``field`` of every ``key`` item a tag-filtered EC2 describe call returns."""
    out = _call(session, "ec2", region, op, cluster, Filters=cluster_filter(cluster))
    return sorted(item[field] for item in (out or {}).get(key, []))


def security_groups(session: boto3.Session, region: str, cluster: str) -> list[str]:
    return _tagged(session, region, cluster, "describe_security_groups", "SecurityGroups",
                   "GroupId")


def delete_security_group(session: boto3.Session, region: str, group_id: str) -> None:
    _call(session, "ec2", region, "delete_security_group", group_id, GroupId=group_id)


def launch_templates(session: boto3.Session, region: str, cluster: str) -> list[str]:
    return _tagged(session, region, cluster, "describe_launch_templates", "LaunchTemplates",
                   "LaunchTemplateId")


def delete_launch_template(session: boto3.Session, region: str, template_id: str) -> None:
    _call(session, "ec2", region, "delete_launch_template", template_id,
          LaunchTemplateId=template_id)


def placement_groups(session: boto3.Session, region: str, cluster: str) -> list[str]:
    return _tagged(session, region, cluster, "describe_placement_groups", "PlacementGroups",
                   "GroupName")


def delete_placement_group(session: boto3.Session, region: str, name: str) -> None:
    _call(session, "ec2", region, "delete_placement_group", name, GroupName=name)


def file_systems(session: boto3.Session, region: str, cluster: str) -> list[dict[str, Any]]:
    """[{id, retain, size_bytes, created, region}] of the cluster's EFS file systems
    (``size_bytes``: EFS's metered size, updated by AWS about hourly)."""
    with aws_call("DescribeFileSystems", cluster):
        pages = client(session, "efs", region).get_paginator(
            "describe_file_systems").paginate()
        found = [f for page in pages for f in page["FileSystems"]]
    out = []
    for fs in found:
        tags = to_dict(fs.get("Tags"))
        if tags.get(CLUSTER_TAG) == cluster and fs.get("LifeCycleState") != "deleted":
            created = fs.get("CreationTime")
            out.append({"id": fs["FileSystemId"], "retain": tags.get(RETAIN_TAG) == "true",
                        "size_bytes": int((fs.get("SizeInBytes") or {}).get("Value") or 0),
                        "created": created.isoformat() if hasattr(created, "isoformat")
                        else str(created or ""), "region": region})
    return sorted(out, key=lambda f: f["id"])


def mount_targets(session: boto3.Session, region: str, fs_id: str) -> list[str]:
    out = _call(session, "efs", region, "describe_mount_targets", fs_id, FileSystemId=fs_id)
    return sorted(m["MountTargetId"] for m in (out or {}).get("MountTargets", []))


def delete_mount_target(session: boto3.Session, region: str, mt_id: str) -> None:
    _call(session, "efs", region, "delete_mount_target", mt_id, MountTargetId=mt_id)


def delete_file_system(session: boto3.Session, region: str, fs_id: str) -> None:
    _call(session, "efs", region, "delete_file_system", fs_id, FileSystemId=fs_id)


# IAM is global; ``region`` (the cluster's) only picks the endpoint and signing region a
# client without one would lack (a custom AWS_ENDPOINT_URL and no AWS_REGION).


def iam_path(cluster: str) -> str:
    """The IAM path the stack gives the cluster's role and instance profile."""
    return f"/clusterkit/{cluster}/"


def _iam_list(session: boto3.Session, op: str, key: str, cluster: str,
              region: str | None) -> list[str]:
    path = iam_path(cluster)
    with aws_call(op, path):
        pages = client(session, "iam", region).get_paginator(op).paginate(PathPrefix=path)
        return sorted(r[key[:-1] + "Name"] for page in pages for r in page[key]
                      if r.get("Path") == path)


def iam_roles(session: boto3.Session, cluster: str, region: str | None = None) -> list[str]:
    return _iam_list(session, "list_roles", "Roles", cluster, region)


def instance_profiles(session: boto3.Session, cluster: str, region: str | None = None) -> list[str]:
    return _iam_list(session, "list_instance_profiles", "InstanceProfiles", cluster, region)


def role_region(session: boto3.Session, name: str, region: str | None = None) -> str | None:
    """The region of the stack that made the role (its ``clusterkit:region`` tag), or
    None for a role without it (made before the tag existed)."""
    out = _call(session, "iam", region, "list_role_tags", name, RoleName=name)
    return to_dict((out or {}).get("Tags")).get(REGION_TAG)


def profile_roles(session: boto3.Session, name: str, region: str | None = None) -> list[str]:
    prof = _call(session, "iam", region, "get_instance_profile", name, InstanceProfileName=name)
    return sorted(r["RoleName"] for r in (prof or {}).get("InstanceProfile", {}).get("Roles", []))


def delete_instance_profile(session: boto3.Session, name: str,
                            region: str | None = None) -> bool:
    """The profile deleted, its roles taken out first; False when there was none."""
    prof = _call(session, "iam", region, "get_instance_profile", name, InstanceProfileName=name)
    for role in (prof or {}).get("InstanceProfile", {}).get("Roles", []):
        _call(session, "iam", region, "remove_role_from_instance_profile", name,
              InstanceProfileName=name, RoleName=role["RoleName"])
    if prof is None:
        return False
    _call(session, "iam", region, "delete_instance_profile", name, InstanceProfileName=name)
    return True


def delete_role(session: boto3.Session, name: str, region: str | None = None) -> None:
    for policy in (_call(session, "iam", region, "list_role_policies", name, RoleName=name)
                   or {}).get("PolicyNames", []):
        _call(session, "iam", region, "delete_role_policy", name, RoleName=name,
              PolicyName=policy)
    attached = _call(session, "iam", region, "list_attached_role_policies", name, RoleName=name)
    for policy in (attached or {}).get("AttachedPolicies", []):
        _call(session, "iam", region, "detach_role_policy", name, RoleName=name,
              PolicyArn=policy["PolicyArn"])
    profiles = _call(session, "iam", region, "list_instance_profiles_for_role", name,
                     RoleName=name)
    for prof in (profiles or {}).get("InstanceProfiles", []):
        _call(session, "iam", region, "remove_role_from_instance_profile", name,
              InstanceProfileName=prof["InstanceProfileName"], RoleName=name)
    _call(session, "iam", region, "delete_role", name, RoleName=name)
