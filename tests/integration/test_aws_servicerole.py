"""aws.servicerole against the emulator over HTTP: the CloudFormation service role is
found by name with its ARN, and a missing one is said, not raised."""

from __future__ import annotations

import boto3

from clusterkit.aws import servicerole
from clusterkit.aws.session import make_session
from tests import support
from tests.integration.conftest import REGION

TRUST = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": '
         '{"Service": "cloudformation.amazonaws.com"}, "Action": "sts:AssumeRole"}]}')


def test_the_role_is_found_by_name_and_a_missing_one_is_no_such_entity(moto_env):
    name = support.unique_name("cfn-role")
    iam = boto3.client("iam", REGION)
    made = iam.create_role(RoleName=name, Path=servicerole.SERVICE_PATH,
                           AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
    session = make_session(REGION)
    assert servicerole.find_role(session, name) == (made, None)
    assert f":role{servicerole.SERVICE_PATH}{name}" in made
    assert servicerole.find_role(session, f"{name}-gone") == (None, "NoSuchEntity")
