"""CloudFormation verbs for the per-cluster stack. One AWS verb per function."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import boto3

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import AWS_EXCEPTIONS, error_code, translate
from clusterkit.aws.tags import to_list

# templates/cluster.yaml, shipped in the package through the symlink clusterkit/resources/.
TEMPLATE_RESOURCE = ("clusterkit.resources", "cluster.yaml")
CAPABILITIES = ["CAPABILITY_IAM"]


def template_body() -> str:
    package, name = TEMPLATE_RESOURCE
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def _cf(session: boto3.Session, region: str) -> Any:
    return client(session, "cloudformation", region)


def _params(params: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()]


def describe_stack(session: boto3.Session, region: str, name: str) -> dict[str, Any] | None:
    """The stack as plain data, or None when it does not exist (or is deleted)."""
    try:
        stacks = _cf(session, region).describe_stacks(StackName=name)["Stacks"]
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
            return None
        raise translate(exc, "DescribeStacks", name) from exc
    if not stacks or stacks[0]["StackStatus"] == "DELETE_COMPLETE":
        return None
    st = stacks[0]
    return {
        "name": st["StackName"], "id": st["StackId"], "status": st["StackStatus"],
        "reason": st.get("StackStatusReason", ""),
        "parameters": {p["ParameterKey"]: p.get("ParameterValue", "")
                       for p in st.get("Parameters", [])},
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in st.get("Outputs", [])},
    }


def create_stack(session: boto3.Session, region: str, name: str, params: Mapping[str, str],
                 tags: Mapping[str, str]) -> str:
    try:
        return _cf(session, region).create_stack(
            StackName=name, TemplateBody=template_body(), Parameters=_params(params),
            Capabilities=CAPABILITIES, Tags=to_list(tags),
            OnFailure="ROLLBACK")["StackId"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "CreateStack", name) from exc


def update_stack(session: boto3.Session, region: str, name: str, params: Mapping[str, str],
                 tags: Mapping[str, str]) -> bool:
    """False when CloudFormation says there is nothing to update."""
    try:
        _cf(session, region).update_stack(
            StackName=name, TemplateBody=template_body(), Parameters=_params(params),
            Capabilities=CAPABILITIES, Tags=to_list(tags))
    except AWS_EXCEPTIONS as exc:
        if "No updates are to be performed" in str(exc):
            return False
        raise translate(exc, "UpdateStack", name) from exc
    return True


def delete_stack(session: boto3.Session, region: str, name: str) -> None:
    try:
        _cf(session, region).delete_stack(StackName=name)
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DeleteStack", name) from exc


def stack_events(session: boto3.Session, region: str, stack_id: str) -> list[dict[str, Any]]:
    """Events of the stack, oldest first, as plain data (first page: the newest 100)."""
    try:
        events = _cf(session, region).describe_stack_events(StackName=stack_id)["StackEvents"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeStackEvents", stack_id) from exc
    return [{"id": e["EventId"], "time": str(e.get("Timestamp", "")),
             "resource": e.get("LogicalResourceId", ""), "type": e.get("ResourceType", ""),
             "status": e.get("ResourceStatus", ""), "reason": e.get("ResourceStatusReason", "")}
            for e in reversed(events)]


def stack_status(session: boto3.Session, region: str, stack_id: str) -> tuple[str, str]:
    """(status, reason) by stack id, which still answers after deletion."""
    try:
        st = _cf(session, region).describe_stacks(StackName=stack_id)["Stacks"][0]
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
            return "DELETE_COMPLETE", ""
        raise translate(exc, "DescribeStacks", stack_id) from exc
    return st["StackStatus"], st.get("StackStatusReason", "")
