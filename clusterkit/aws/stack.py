"""CloudFormation verbs for the per-cluster stack. One AWS verb per function."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import AwsCall, aws_call
from clusterkit.aws.tags import to_list

if TYPE_CHECKING:
    import boto3

# templates/cluster.yaml, shipped in the package through the symlink clusterkit/resources/.
TEMPLATE_RESOURCE = ("clusterkit.resources", "cluster.yaml")
CAPABILITIES = ["CAPABILITY_IAM"]
# Follows the account's service role, not the spec (cluster.cfnrole): kept out of the
# parameters a stack is compared by, and passed on each create and update.
ROLE_PARAMS = frozenset({"NodeRoleBoundary"})


def template_body() -> str:
    package, name = TEMPLATE_RESOURCE
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def template_digest() -> str:
    """Names the template this clusterkit applies (the stack's TemplateDigest)."""
    return hashlib.sha256(template_body().encode()).hexdigest()[:16]


def _cf(session: boto3.Session, region: str) -> Any:
    return client(session, "cloudformation", region)


def _describe_call(stack: str) -> AwsCall:
    """DescribeStacks, where a stack name or id CloudFormation does not know ends the
    block quietly (ValidationError "... does not exist")."""
    return aws_call("DescribeStacks", stack, expected=("ValidationError",),
                    message="does not exist")


def _params(params: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()]


def _role(role_arn: str | None) -> dict[str, str]:
    """RoleARN: CloudFormation acts as that role; without it, with the caller's rights."""
    return {"RoleARN": role_arn} if role_arn else {}


def describe_stack(session: boto3.Session, region: str, name: str) -> dict[str, Any] | None:
    """The stack as plain data, or None when it does not exist (or is deleted)."""
    stacks: list[dict[str, Any]] = []
    with _describe_call(name):
        stacks = _cf(session, region).describe_stacks(StackName=name)["Stacks"]
    if not stacks or stacks[0]["StackStatus"] == "DELETE_COMPLETE":
        return None
    return _record(stacks[0])


def _record(st: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": st["StackName"], "id": st["StackId"], "status": st["StackStatus"],
        "reason": st.get("StackStatusReason", ""),
        "parameters": {p["ParameterKey"]: p.get("ParameterValue", "")
                       for p in st.get("Parameters", []) if p["ParameterKey"] not in ROLE_PARAMS},
        "role_arn": st.get("RoleARN", ""),
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in st.get("Outputs", [])},
    }


def create_stack(session: boto3.Session, region: str, name: str, params: Mapping[str, str],
                 tags: Mapping[str, str], role_arn: str | None = None) -> str:
    with aws_call("CreateStack", name):
        return _cf(session, region).create_stack(
            StackName=name, TemplateBody=template_body(), Parameters=_params(params),
            Capabilities=CAPABILITIES, Tags=to_list(tags),
            OnFailure="ROLLBACK", **_role(role_arn))["StackId"]


def update_stack(session: boto3.Session, region: str, name: str, params: Mapping[str, str],
                 tags: Mapping[str, str], role_arn: str | None = None) -> bool:
    """False when CloudFormation says there is nothing to update."""
    with aws_call("UpdateStack", name, expected=("ValidationError",),
                  message="No updates are to be performed") as call:
        _cf(session, region).update_stack(
            StackName=name, TemplateBody=template_body(), Parameters=_params(params),
            Capabilities=CAPABILITIES, Tags=to_list(tags), **_role(role_arn))
    return call.expected_error is None


def delete_stack(session: boto3.Session, region: str, name: str,
                 role_arn: str | None = None) -> None:
    with aws_call("DeleteStack", name):
        _cf(session, region).delete_stack(StackName=name, **_role(role_arn))


def stack_events(session: boto3.Session, region: str, stack_id: str) -> list[dict[str, Any]]:
    """Events of the stack, oldest first, as plain data (first page: the newest 100)."""
    with aws_call("DescribeStackEvents", stack_id):
        events = _cf(session, region).describe_stack_events(StackName=stack_id)["StackEvents"]
    return [{"id": e["EventId"], "time": str(e.get("Timestamp", "")),
             "resource": e.get("LogicalResourceId", ""), "type": e.get("ResourceType", ""),
             "physical": e.get("PhysicalResourceId", ""), "status": e.get("ResourceStatus", ""),
             "reason": e.get("ResourceStatusReason", "")}
            for e in reversed(events)]


def stack_record(session: boto3.Session, region: str, stack_id: str) -> dict[str, Any]:
    """The stack as plain data (describe_stack's) by stack id, which still answers after
    deletion (status DELETE_COMPLETE)."""
    with _describe_call(stack_id):
        return _record(_cf(session, region).describe_stacks(StackName=stack_id)["Stacks"][0])
    return {"name": "", "id": stack_id, "status": "DELETE_COMPLETE", "reason": "",
            "parameters": {}, "role_arn": "", "outputs": {}}
