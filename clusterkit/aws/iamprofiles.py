"""The cluster's instance profiles through IAM's own API (``plan.profiles``): listed by
the cluster's IAM path, created tagged, given the stack's role. A profile or a role
already there counts as done, so an `up` that stopped half-way is resumed by the next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import to_list

if TYPE_CHECKING:
    import boto3

# AssociateIamInstanceProfile on a profile IAM has not propagated to EC2 yet
NOT_PROPAGATED = ("InvalidParameterValue", "Invalid IAM Instance Profile")


def cluster_profiles(session: boto3.Session, path: str,
                     region: str | None = None) -> dict[str, tuple[str, ...]]:
    """Every profile under ``path`` (the cluster's), with the roles it holds."""
    with aws_call("ListInstanceProfiles", path):
        pages = client(session, "iam", region).get_paginator(
            "list_instance_profiles").paginate(PathPrefix=path)
        return {p["InstanceProfileName"]: tuple(sorted(r["RoleName"] for r in p["Roles"]))
                for page in pages for p in page["InstanceProfiles"] if p.get("Path") == path}


def create_profile(session: boto3.Session, name: str, path: str, tags: Mapping[str, str],
                   region: str | None = None) -> bool:
    """Create the profile, tagged; False when it exists already."""
    with aws_call("CreateInstanceProfile", name, expected=("EntityAlreadyExists",)) as call:
        client(session, "iam", region).create_instance_profile(
            InstanceProfileName=name, Path=path, Tags=to_list(tags))
    return call.expected_error is None


def add_role(session: boto3.Session, name: str, role: str, region: str | None = None) -> bool:
    """Put ``role`` in the profile; False when it holds a role already (one at most)."""
    with aws_call("AddRoleToInstanceProfile", name, expected=("LimitExceeded",)) as call:
        client(session, "iam", region).add_role_to_instance_profile(
            InstanceProfileName=name, RoleName=role)
    return call.expected_error is None
