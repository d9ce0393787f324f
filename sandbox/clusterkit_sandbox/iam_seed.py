"""The account-wide IAM a real account gets once from `clusterkit iam-policy --role
cloudformation --stack`: the CloudFormation service role and the node boundary (the
shipped node policy), so the sandbox's stacks run as that role (RoleARN) as on AWS."""

from __future__ import annotations

import json
from importlib import resources

from clusterkit.aws.servicerole import BOUNDARY_NAME, ROLE_NAME, SERVICE_PATH

TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "cloudformation.amazonaws.com"},
    "Action": "sts:AssumeRole"}]}


def install() -> str:
    """Create the service role and the boundary policy in the emulator's default
    account (in process, as the other extras); the role's ARN."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends

    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    node = resources.files("clusterkit.resources").joinpath("iam-policy-node.json")
    iam.create_policy(description="clusterkit node boundary", path=SERVICE_PATH,
                      policy_document=node.read_text(encoding="utf-8"),
                      policy_name=BOUNDARY_NAME, tags=[])
    role = iam.create_role(role_name=ROLE_NAME, assume_role_policy_document=json.dumps(TRUST),
                           path=SERVICE_PATH, permissions_boundary=None,
                           description="clusterkit CloudFormation service role", tags=[],
                           max_session_duration=None)
    return str(role.arn)
