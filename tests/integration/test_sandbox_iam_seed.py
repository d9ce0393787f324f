"""The sandbox's account has what `clusterkit iam-policy --role cloudformation --stack`
makes once per real account: the CloudFormation service role and the node boundary (the
shipped node policy), so `up` in the sandbox runs its stack as that role."""

from __future__ import annotations

import json
from urllib.parse import unquote

from clusterkit.aws.servicerole import BOUNDARY_NAME, ROLE_NAME, SERVICE_PATH
from clusterkit.cluster.ops.iampolicy import PolicyRole, policy
from clusterkit.cluster.provision.cfnrole import stack_role
from clusterkit.cluster.runtime import Runtime


def test_the_sandbox_account_has_the_service_role_and_boundary(sandbox_env, monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_CLOUDFORMATION_ROLE", raising=False)
    iam = sandbox_env.client("iam")
    role = iam.get_role(RoleName=ROLE_NAME)["Role"]
    assert role["Path"] == SERVICE_PATH
    assert "cloudformation.amazonaws.com" in json.dumps(role["AssumeRolePolicyDocument"])
    account = role["Arn"].split(":")[4]
    boundary = f"arn:aws:iam::{account}:policy{SERVICE_PATH}{BOUNDARY_NAME}"
    version = iam.get_policy(PolicyArn=boundary)["Policy"]["DefaultVersionId"]
    doc = iam.get_policy_version(PolicyArn=boundary, VersionId=version)["PolicyVersion"]
    document = doc["Document"]
    if isinstance(document, str):
        document = json.loads(unquote(document))
    assert document == policy(PolicyRole.NODE)
    found = stack_role(Runtime.make())
    assert (found.arn, found.boundary) == (role["Arn"], boundary)
