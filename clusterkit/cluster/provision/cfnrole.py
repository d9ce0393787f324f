"""Which role CloudFormation runs the cluster's stack as, found once per session.

The account's service role (``clusterkit-cloudformation``, made once by `clusterkit
iam-policy --role cloudformation --stack`) when it exists: then the user needs no IAM
write, and the nodes' role gets the boundary the service role must set. Without it the
stack runs with the caller's own permissions, said once as a warning with the command
that creates the role. ``CLUSTERKIT_CLOUDFORMATION_ROLE`` names another role ARN, or
``none`` for the caller's permissions without the lookup or the warning."""

from __future__ import annotations

import os
import re
import threading
import weakref
from typing import Any

from clusterkit.aws import servicerole
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.events import Stage
from clusterkit.plan.stack import StackRole

ENV = "CLUSTERKIT_CLOUDFORMATION_ROLE"
ROLE_ARN = re.compile(r"^arn:(aws[a-z-]*):iam::(\d{12}):role/[\w+=,.@/-]+$")
CREATE = (f"clusterkit iam-policy --role cloudformation --stack > {servicerole.STACK_NAME}.yaml"
          f" && aws cloudformation deploy --stack-name {servicerole.STACK_NAME} "
          f"--template-file {servicerole.STACK_NAME}.yaml --capabilities CAPABILITY_NAMED_IAM")


_lock = threading.Lock()
_found: weakref.WeakKeyDictionary[Any, StackRole] = weakref.WeakKeyDictionary()


def _with_boundary(arn: str) -> StackRole:
    match = ROLE_ARN.match(arn)
    if match is None:
        raise UsageError(f"{ENV}={arn!r} is not an IAM role ARN",
                         "e.g. arn:aws:iam::123456789012:role/clusterkit-service/"
                         f"{servicerole.ROLE_NAME}, or `none`")
    partition, account = match.groups()
    return StackRole(arn, f"arn:{partition}:iam::{account}:policy"
                          f"{servicerole.SERVICE_PATH}{servicerole.BOUNDARY_NAME}")


def _lookup(rt: Runtime, region: str | None) -> StackRole:
    override = os.environ.get(ENV, "").strip()
    if override.lower() == "none":
        return StackRole()
    if override:
        return _with_boundary(override)
    arn, error = servicerole.find_role(rt.session, region=region)
    if arn:
        return _with_boundary(arn)
    why = ("does not exist in this account" if error == "NoSuchEntity"
           else "cannot be read by you (iam:GetRole denied)")
    return StackRole(warning=(
        f"the CloudFormation service role {servicerole.ROLE_NAME} {why}: the stack runs "
        "with your own permissions (IAM and EC2 writes; see `clusterkit iam-policy`). "
        f"Create the role once per account: {CREATE}; or set {ENV}=<role ARN> "
        f"({ENV}=none: your permissions, without this warning)"))


def stack_role(rt: Runtime, region: str | None = None, *, warn: bool = True) -> StackRole:
    """The role of the session's stack calls, looked up once (``region``: the stack's,
    signing the IAM lookup where the session has none); its ``warning`` said then when
    ``warn`` (`up` and `plan` show it among the plan's lines instead)."""
    with _lock:
        if rt.session in _found:
            return _found[rt.session]
        _found[rt.session] = role = _lookup(rt, region)
    if warn and role.warning:
        rt.warn(role.warning, stage=Stage.STACK)
    return role
