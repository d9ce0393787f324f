"""The CloudFormation service role: the one role clusterkit's stacks run as (RoleARN on
create, update and delete), made once per account by `clusterkit iam-policy --role
cloudformation --stack`. Its path is outside ``/clusterkit/``, where the stacks' node roles
live and where the role's own IAM rights reach: it cannot change itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call

if TYPE_CHECKING:
    import boto3

ROLE_NAME = "clusterkit-cloudformation"
BOUNDARY_NAME = "clusterkit-node-boundary"  # the managed policy capping the node roles
SERVICE_PATH = "/clusterkit-service/"
# The once-per-account stack; not named clusterkit-*, which the user's policy may update.
STACK_NAME = "iam-for-clusterkit"
DENIED = ("AccessDenied", "AccessDeniedException")


def find_role(session: boto3.Session, name: str = ROLE_NAME,
              region: str | None = None) -> tuple[str | None, str | None]:
    """(the role's ARN, None) when it exists; (None, the error code) when it does not
    (NoSuchEntity) or the caller may not read it (AccessDenied). IAM is global:
    ``region`` (the stack's) only signs the call where the session has none."""
    with aws_call("GetRole", name, expected=("NoSuchEntity", *DENIED)) as call:
        iam = client(session, "iam", region)
        return str(iam.get_role(RoleName=name)["Role"]["Arn"]), None
    return None, call.expected_error
