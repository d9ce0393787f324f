"""scripts/iam_policy.py: the shipped policies (user, CloudFormation service role, the
recovery controller, the node boundary) are what the code and the stack template need
today, and no more: every handler permission of the template's resource types is granted
to the service role, no write is granted on ``*`` without a condition, the user holds no
IAM write but PassRole (and the spot service-linked role), the boundary is the union of
the stack's roles, the controller's role in one cluster's stack reaches that cluster's
instances only, and the cases in iam_policy_cases/ (policies as data: an action on a
resource, with a request context, allowed or not) hold."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import pytest

from clusterkit.aws.servicerole import ROLE_NAME, SERVICE_PATH
from clusterkit.cluster.ops.iampolicy import (
    CLUSTER_PLACEHOLDER,
    PolicyRole,
    controller_policy_text,
    policy,
    service_role_stack,
)
from clusterkit.plan.stack import STACK_PREFIX
from tests import support

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((Path(__file__).parent / "iam_policy_cases").glob("*.json"))
# Allowed on "*" without a condition: reads of metadata.
READ = re.compile(r"^[a-z0-9-]+:(Describe|List|Get)[A-Za-z]*$")
# IAM's size limits (characters, whitespace aside): managed policy, inline role policy.
MANAGED_MAX, INLINE_MAX = 6144, 10240


@pytest.fixture(scope="module")
def iam_policy():
    return support.load_script("iam_policy")


def _statements(doc: dict) -> list[dict]:
    return [{**s, "Action": _list(s["Action"]), "Resource": _list(s["Resource"])}
            for s in doc["Statement"]]


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _granted(doc: dict) -> set[str]:
    return {a for s in _statements(doc) for a in s["Action"]}


def user_documents() -> dict:
    """What the user holds: the two managed policies, `user` and `user-read`, as one."""
    return {"Statement": [*policy(PolicyRole.USER)["Statement"],
                          *policy(PolicyRole.USER_READ)["Statement"]]}


def _like(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _resource_like(pattern: str, arn: str) -> bool:
    """IAM's match of a Resource pattern: ``*`` and ``?`` wildcards, and the policy
    variables ``${*}``, ``${?}``, ``${$}`` for the literal characters (``${*}`` matches
    only the "*" id IAM gives what the request creates: CopySnapshot's copy)."""
    escaped = pattern.replace("[", "[[]").replace("${*}", "[*]").replace("${?}", "[?]")
    return fnmatch.fnmatchcase(arn, escaped.replace("${$}", "$"))


def _condition_holds(condition: dict[str, dict], context: dict[str, str]) -> bool:
    """IAM's evaluation of the operators the policies use; a key missing from the
    request matches only Null "true" and the negated operators."""
    for op, keys in condition.items():
        for key, want in keys.items():
            wants = [re.sub(r"\$\{([^}]+)\}", lambda m: context.get(m.group(1), "?"), w)
                     for w in _list(want)]
            have = context.get(key)
            if op == "Null":
                ok = (have is None) == (wants[0] == "true")
            elif op == "ForAllValues:StringEquals":  # a multivalued key: comma-separated
                ok = have is None or all(v in wants for v in have.split(","))
            elif have is None:
                ok = op.startswith("StringNot")
            elif op in ("StringEquals", "Bool"):
                ok = have in wants
            elif op in ("ArnEquals", "ArnLike"):  # both take wildcards
                ok = any(_like(w, have) for w in wants)
            elif op == "StringNotEquals":
                ok = have not in wants
            elif op == "StringLike":
                ok = any(_like(w, have) for w in wants)
            elif op == "StringNotLike":
                ok = not any(_like(w, have) for w in wants)
            else:
                raise AssertionError(f"the test knows no condition operator {op}")
            if not ok:
                return False
    return True


def allowed(doc: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    return any(s["Effect"] == "Allow"
               and any(_like(a, action) for a in s["Action"])
               and any(_resource_like(r, resource) for r in s["Resource"])
               and _condition_holds(s.get("Condition", {}), context)
               for s in _statements(doc))


def _case_document(iam_policy, check: dict) -> dict:
    """The policy a case's check is evaluated against: "stack" (values of cluster c1's
    stack, STACK_VALUES but the ones given), the template's ControllerRole as that stack
    makes it; "cluster", the controller's document of that cluster; else the role's."""
    if "stack" in check:
        values = {**STACK_VALUES, **check["stack"]}
        return {"Statement": iam_policy.role_statements("ControllerRole", values)}
    if "cluster" in check:
        return json.loads(controller_policy_text(check["cluster"]))
    if check["role"] == PolicyRole.USER.value:
        return user_documents()
    return policy(PolicyRole(check["role"]))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_policy_case(case, iam_policy):
    data = json.loads(case.read_text())
    assert data["why"] and data["checks"]
    for check in data["checks"]:
        doc = _case_document(iam_policy, check)
        got = allowed(doc, check["action"], check["resource"], check.get("context", {}))
        assert got == check["allowed"], f"{case.name}: {check}"


def test_shipped_files_are_the_generated_ones(iam_policy):
    for path, text in iam_policy.rendered().items():
        assert path.read_text() == text, f"{path} is stale: python scripts/iam_policy.py --write"
    assert iam_policy.main(["--check"]) == 0
    for role in PolicyRole:  # the package data the CLI prints is the same file
        assert policy(role) == iam_policy.policy(role.value)
    assert service_role_stack() == iam_policy.STACK_FILE.read_text()


def test_a_stale_file_is_found(iam_policy, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "iam-policy.json"
    stale.write_text("{}\n")
    monkeypatch.setitem(iam_policy.FILES, "user", stale)
    assert iam_policy.main(["--check"]) == 1
    assert "iam-policy.json" in capsys.readouterr().err


@pytest.mark.parametrize("role", list(PolicyRole), ids=lambda r: r.value)
def test_no_write_is_granted_on_star_without_a_condition(role):
    for s in _statements(policy(role)):
        if "*" in s["Resource"] and "Condition" not in s:
            writes = [a for a in s["Action"] if not READ.match(a) or "*" in a]
            assert writes == [], f"{role.value}: {s['Sid']} grants {writes} on *"
        assert all(":" in a and "*" not in a for a in s["Action"]), s  # no wildcards


def _minified(doc: dict) -> int:
    """The policy's size as IAM counts it: whitespace aside."""
    return len(json.dumps(doc, separators=(",", ":")))


@pytest.mark.parametrize("role", list(PolicyRole), ids=lambda r: r.value)
def test_policy_fits_iam_limits(role):
    """The user's policy is a managed policy (6,144 characters; 6,018 in issue 36, 5,951 in
    issue 39 once ClusterResources named no resource type: its tag condition confines it;
    6,141 in issue 41 with the cluster's instance profiles; then its reads became a policy
    of their own, `user-read`); the controller's fits with the longest cluster name filled
    in."""
    doc = policy(role)
    if role is PolicyRole.CONTROLLER:
        doc = json.loads(controller_policy_text("c" * 63))
    limit = INLINE_MAX if role is PolicyRole.CLOUDFORMATION else MANAGED_MAX
    size = _minified(doc)
    assert size <= limit, f"{role.value}: {size} characters minified, over IAM's {limit}"
    sids = [s["Sid"] for s in doc["Statement"]]
    assert len(sids) == len(set(sids))
    for s in doc["Statement"]:
        assert s["Effect"] == "Allow" and s["Action"] == sorted(set(s["Action"]))


def test_the_users_reads_are_a_managed_policy_of_their_own():
    """`user-read` is the one Read statement on * (every action a Describe, List or Get);
    `user` holds every other statement and no Read, so the two attached are what one
    policy held before and neither holds the other's."""
    [read] = _statements(policy(PolicyRole.USER_READ))
    assert read["Sid"] == "Read" and read["Resource"] == ["*"] and "Condition" not in read
    assert read["Action"] and all(READ.match(a) for a in read["Action"]), read["Action"]
    writes = _statements(policy(PolicyRole.USER))
    assert writes and all(s["Sid"] != "Read" for s in writes)
    assert all(s["Resource"] != ["*"] or "Condition" in s for s in writes)


def test_every_template_type_needs_nothing_the_service_role_lacks(iam_policy):
    """cfn-lint's handler permissions (create/read/update/delete/list) of every resource
    type in the stack template are granted, except the ones withheld on purpose."""
    granted = _granted(policy(PolicyRole.CLOUDFORMATION))
    types = iam_policy.stack_resource_types()
    assert {"AWS::IAM::Role", "AWS::EC2::LaunchTemplate", "AWS::EFS::FileSystem"} <= types
    for resource_type in sorted(types):
        missing = iam_policy.handler_actions(resource_type) - granted - iam_policy.WITHHELD
        assert missing == set(), f"{resource_type} needs {sorted(missing)}"
    assert {"elasticfilesystem:PutLifecycleConfiguration", "elasticfilesystem:PutBackupPolicy",
            "elasticfilesystem:DescribeReplicationConfigurations",
            "iam:AttachRolePolicy"} <= granted
    assert {"iam:DeleteRolePermissionsBoundary", "iam:PutUserPolicy", "iam:PutGroupPolicy",
            "iam:DeleteUserPolicy", "iam:DeleteGroupPolicy",
            "iam:UpdateAssumeRolePolicy"} == iam_policy.WITHHELD
    assert not granted & iam_policy.WITHHELD


def test_the_service_role_never_needs_to_rewrite_a_trust_policy(iam_policy):
    """iam:UpdateAssumeRolePolicy is withheld (with it, any stack the service role runs
    could let another account assume any cluster's roles): CloudFormation calls it only
    when a role's AssumeRolePolicyDocument changes, and the template's are constant, the
    same in every stack (EC2 assumes the role), with no parameter or condition in them."""
    template = iam_policy._template()  # an intrinsic function would be a {"Fn::…": …}
    ec2_trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
        "Action": "sts:AssumeRole"}]}
    roles = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
    assert set(roles) == {"NodeRole", "ControllerRole"}
    for name, role in roles.items():
        assert role["Properties"]["AssumeRolePolicyDocument"] == ec2_trust, name
    granted = _granted(policy(PolicyRole.CLOUDFORMATION))
    assert "iam:UpdateAssumeRolePolicy" in iam_policy.handler_actions("AWS::IAM::Role")
    assert "iam:UpdateAssumeRolePolicy" not in granted


PROFILE_WRITES = {"iam:CreateInstanceProfile", "iam:TagInstanceProfile",
                  "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
                  "iam:DeleteInstanceProfile"}


def test_the_user_holds_no_iam_write_but_passing_two_roles_and_the_clusters_profiles():
    """No role is made or changed by the user (the service role makes them, bounded);
    its only IAM writes besides passing the two roles are the cluster's instance
    profiles (plan.profiles): under clusterkit's path, and tagged for a cluster."""
    statements = _statements(user_documents())
    writes = {a for s in statements for a in s["Action"]
              if a.startswith("iam:") and not READ.match(a)}
    assert writes == {"iam:PassRole", "iam:CreateServiceLinkedRole", *PROFILE_WRITES}
    for s in statements:
        granted = PROFILE_WRITES & set(s["Action"])
        iam_arns = [r for r in s["Resource"] if r.startswith("arn:aws:iam:")]
        if granted & {"iam:CreateInstanceProfile", "iam:TagInstanceProfile"}:
            assert iam_arns == ["arn:aws:iam::*:instance-profile/clusterkit/*"], s["Sid"]
            assert s["Condition"] == {"Null": {"aws:RequestTag/clusterkit:cluster": "false"}}
        elif granted:  # only on what carries a cluster's tag: only clusterkit tags a profile
            assert s["Condition"] == {"Null": {"aws:ResourceTag/clusterkit:cluster": "false"}}
    for s in statements:
        if "iam:PassRole" in s["Action"]:
            assert s["Action"] == ["iam:PassRole"] and "*" not in s["Resource"]
            assert "iam:PassedToService" in s["Condition"]["StringEquals"]
        if "iam:CreateServiceLinkedRole" in s["Action"]:
            assert s["Condition"] == {"StringEquals": {
                "iam:AWSServiceName": "spot.amazonaws.com"}}
    passed = {r for s in statements if "iam:PassRole" in s["Action"] for r in s["Resource"]}
    assert passed == {f"arn:aws:iam::*:role{SERVICE_PATH}{ROLE_NAME}",
                      "arn:aws:iam::*:role/clusterkit/*"}


def test_stack_calls_only_on_clusterkit_stacks():
    for role in (PolicyRole.USER, PolicyRole.CLOUDFORMATION):
        for s in _statements(policy(role)):
            writes = [a for a in s["Action"]
                      if a.startswith("cloudformation:") and not READ.match(a)]
            if writes:
                assert s["Resource"] == [f"arn:aws:cloudformation:*:*:stack/{STACK_PREFIX}*/*"]


def test_service_role_iam_reaches_only_clusterkit_paths():
    for s in _statements(policy(PolicyRole.CLOUDFORMATION)):
        writes = [a for a in s["Action"] if a.startswith("iam:") and not READ.match(a)]
        if not writes:
            continue
        for resource in s["Resource"]:
            assert re.match(r"arn:aws:iam::\*:(role|instance-profile)/(clusterkit/|"
                            r"aws-service-role/elasticfilesystem)", resource), s
        if {"iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy"} & set(writes):
            assert "iam:PermissionsBoundary" in s["Condition"]["StringLike"], s
    # the service role's own path is not under the paths it may change
    assert not SERVICE_PATH.startswith("/clusterkit/")


def _canonical(statements: list[dict]) -> set[str]:
    return {json.dumps(s, sort_keys=True) for s in _statements({"Statement": statements})}


def test_the_boundary_is_the_union_of_the_stacks_roles(iam_policy):
    """The node document, the boundary of every role the stacks create, is every
    statement of the node role and of the controller role; the node role's own policy
    stays an EFS client's, and both roles carry the boundary."""
    assert iam_policy._roles() == ["NodeRole", "ControllerRole"]
    node = iam_policy.role_statements("NodeRole")
    assert [s["Sid"] for s in node] == ["EfsClient"]
    assert all(a.startswith("elasticfilesystem:Client") for s in node for a in s["Action"])
    controller = iam_policy.role_statements("ControllerRole")  # any cluster's
    assert _canonical(policy(PolicyRole.NODE)["Statement"]) == \
        _canonical(node) | _canonical(controller)
    template = (ROOT / "templates/cluster.yaml").read_text()
    assert template.count(
        "PermissionsBoundary: !If [NodeRoleBounded, !Ref NodeRoleBoundary") == 2


def test_the_controller_reads_what_up_reads_but_iam(iam_policy, monkeypatch):
    doc = policy(PolicyRole.CONTROLLER)
    reads = {a for s in _statements(doc) if s["Resource"] == ["*"] for a in s["Action"]}
    user = {a for s in _statements(policy(PolicyRole.USER_READ)) if s["Sid"] == "Read"
            for a in s["Action"]}
    assert reads == {a for a in user if not a.startswith("iam:")}
    assert {"ec2:DescribeInstances", "cloudformation:DescribeStacks", "pricing:GetProducts",
            "ec2:DescribeSpotPriceHistory", "ec2:DescribeIamInstanceProfileAssociations",
            "elasticfilesystem:DescribeMountTargets"} <= reads
    # a read `up` gains and the template's ControllerPolicy lacks fails the script
    monkeypatch.setattr(iam_policy, "controller_reads",
                        lambda: user - {"ec2:DescribeVpcs"} | {"ec2:DescribeHosts"})
    with pytest.raises(SystemExit, match=r"add \['ec2:DescribeHosts'.*remove.*DescribeVpcs"):
        iam_policy.controller_policy()


ACCOUNT, OTHER_ACCOUNT, CLUSTER = "111122223333", "999988887777", "c1"
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/clusterkit/{CLUSTER}/clusterkit-c1-NodeRole-AB"
STACK_VALUES: dict[str, Any] = {
    "AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": ACCOUNT,
    "ClusterName": CLUSTER, "NodeRole.Arn": NODE_ROLE, "ExistingFileSystemId": "fs-1",
    "EfsRetained": "fs-2", "EfsDeleted": "fs-3", "ImageId": "ami-1", "KeyName": "k",
    "InstanceTypes": "p4d.24xlarge,p5.48xlarge",
    "CapacityReservations": "cr-0123456789abcdef0"}
LAUNCH_TEMPLATE = f"arn:aws:ec2:us-east-1:{ACCOUNT}:launch-template/lt-1"


def _ec2(kind: str, rid: str, account: str = ACCOUNT, region: str = "us-east-1") -> str:
    return f"arn:aws:ec2:{region}:{account}:{kind}/{rid}"


def _tag(key: str, cluster: str = CLUSTER, **more: str) -> dict[str, str]:
    return {f"aws:{key}/clusterkit:cluster": cluster, **more}


def _launch(cluster: str = CLUSTER, **more: str) -> dict[str, str]:
    """The request context of the instance a legitimate launch makes (c1's stack)."""
    return {**_tag("RequestTag", cluster), "ec2:InstanceType": "p4d.24xlarge",
            "ec2:MetadataHttpTokens": "required", "ec2:LaunchTemplate": LAUNCH_TEMPLATE,
            **more}


# (action, resource, request context, allowed by the controller role of cluster c1's stack)
CONTROLLER_CHECKS = [
    ("ec2:RunInstances", _ec2("instance", "*"), _launch(), True),
    ("ec2:RunInstances", _ec2("instance", "*"), _launch("c2"), False),
    ("ec2:RunInstances", _ec2("instance", "*"), {}, False),
    ("ec2:RunInstances", _ec2("instance", "*"), _tag("RequestTag"), False),
    ("ec2:RunInstances", _ec2("instance", "*"),
     _launch(**{"ec2:InstanceType": "p5.48xlarge"}), True),
    ("ec2:RunInstances", _ec2("instance", "*"),
     _launch(**{"ec2:InstanceType": "x2iedn.32xlarge"}), False),
    ("ec2:RunInstances", _ec2("instance", "*"),
     _launch(**{"ec2:MetadataHttpTokens": "optional"}), False),
    ("ec2:RunInstances", _ec2("instance", "*"),
     {k: v for k, v in _launch().items() if k != "ec2:LaunchTemplate"}, False),
    ("ec2:RunInstances", _ec2("volume", "*"), _tag("RequestTag"), True),
    ("ec2:RunInstances", _ec2("network-interface", "*"), _tag("RequestTag"), True),
    ("ec2:RunInstances", _ec2("network-interface", "eni-1"), {}, False),  # someone else's
    ("ec2:RunInstances", _ec2("spot-instances-request", "*"), _tag("RequestTag"), True),
    ("ec2:RunInstances", _ec2("instance", "*", OTHER_ACCOUNT), _launch(), False),
    ("ec2:RunInstances", _ec2("launch-template", "lt-1"), _tag("ResourceTag"), True),
    ("ec2:RunInstances", _ec2("launch-template", "lt-1"), _tag("ResourceTag", "c2"), False),
    ("ec2:RunInstances", _ec2("launch-template", "lt-9"), {}, False),
    ("ec2:RunInstances", _ec2("security-group", "sg-1"), _tag("ResourceTag"), True),
    ("ec2:RunInstances", _ec2("security-group", "sg-1"), {}, False),
    ("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-1", {}, True),
    ("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-9", {}, False),
    ("ec2:RunInstances", "arn:aws:ec2:eu-west-1::image/ami-1", {}, False),
    ("ec2:RunInstances", _ec2("subnet", "subnet-1"), {}, True),
    ("ec2:RunInstances", _ec2("subnet", "subnet-1", OTHER_ACCOUNT), {}, False),
    ("ec2:RunInstances", _ec2("key-pair", "k"), {}, True),
    ("ec2:RunInstances", _ec2("key-pair", "someone-elses"), {}, False),
    ("ec2:RunInstances", _ec2("placement-group", "pg"), _tag("ResourceTag"), True),
    ("ec2:RunInstances", _ec2("placement-group", "pg-9"), _tag("ResourceTag", "c2"), False),
    ("ec2:RunInstances", _ec2("placement-group", "pg-9"), {}, False),
    ("ec2:RunInstances", _ec2("capacity-reservation", "cr-0123456789abcdef0"), {}, True),
    ("ec2:RunInstances", _ec2("capacity-reservation", "cr-0999999999abcdef0"), {}, False),
    ("ec2:RunInstances", "arn:aws:ec2:us-east-1::snapshot/snap-1",
     {"aws:ResourceTag/clusterkit:dataset": "imagenet", "ec2:Owner": ACCOUNT}, True),
    ("ec2:RunInstances", "arn:aws:ec2:us-east-1::snapshot/snap-1", {"ec2:Owner": ACCOUNT},
     False),
    ("ec2:RunInstances", "arn:aws:ec2:us-east-1::snapshot/snap-1",
     {"ec2:Owner": OTHER_ACCOUNT}, True),
    ("ec2:CreateTags", _ec2("instance", "i-1"),
     _tag("RequestTag", **{"ec2:CreateAction": "RunInstances"}), True),
    ("ec2:CreateTags", _ec2("network-interface", "eni-1"),
     _tag("RequestTag", **{"ec2:CreateAction": "RunInstances"}), True),
    ("ec2:CreateTags", _ec2("instance", "i-1"), _tag("RequestTag"), False),
    ("ec2:CreateTags", _ec2("instance", "i-1"),
     _tag("ResourceTag", **{"aws:TagKeys": "clusterkit:role,Name"}), True),
    ("ec2:CreateTags", _ec2("volume", "vol-1"),
     _tag("ResourceTag", **{"aws:TagKeys": "clusterkit:index"}), True),
    ("ec2:CreateTags", _ec2("instance", "i-1"),
     _tag("ResourceTag", **{"aws:TagKeys": "clusterkit:role,clusterkit:cluster"}), False),
    ("ec2:CreateTags", _ec2("instance", "i-1"), _tag("ResourceTag", "c2"), False),
    ("ec2:CreateTags", _ec2("security-group", "sg-1"), _tag("ResourceTag"), False),
    ("ec2:DeleteTags", _ec2("instance", "i-1"),
     _tag("ResourceTag", **{"aws:TagKeys": "clusterkit:standby-for"}), True),
    ("ec2:DeleteTags", _ec2("instance", "i-1"),
     _tag("ResourceTag", **{"aws:TagKeys": "clusterkit:standby-for,clusterkit:cluster"}),
     False),
    ("ec2:DeleteTags", _ec2("instance", "i-1"),
     _tag("ResourceTag", "c2", **{"aws:TagKeys": "clusterkit:standby-for"}), False),
    ("ec2:TerminateInstances", _ec2("instance", "i-1"), _tag("ResourceTag"), True),
    ("ec2:TerminateInstances", _ec2("instance", "i-1"), _tag("ResourceTag", "c2"), False),
    ("ec2:TerminateInstances", _ec2("instance", "i-1"), {}, False),
    ("ec2:GetConsoleOutput", _ec2("instance", "i-1"), _tag("ResourceTag"), True),
    ("ec2:GetConsoleOutput", _ec2("instance", "i-1"), _tag("ResourceTag", "c2"), False),
    ("ec2:AssociateIamInstanceProfile", _ec2("instance", "i-1"), _tag("ResourceTag"), True),
    ("ec2:AssociateIamInstanceProfile", _ec2("instance", "i-1"), {}, False),
    ("iam:PassRole", NODE_ROLE, {"iam:PassedToService": "ec2.amazonaws.com"}, True),
    ("iam:PassRole", NODE_ROLE, {"iam:PassedToService": "lambda.amazonaws.com"}, False),
    ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/clusterkit/{CLUSTER}/clusterkit-c1-"
     "ControllerRole-CD", {"iam:PassedToService": "ec2.amazonaws.com"}, False),
    ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin",
     {"iam:PassedToService": "ec2.amazonaws.com"}, False),
    ("elasticfilesystem:ClientMount",
     f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/fs-3",
     {"elasticfilesystem:AccessedViaMountTarget": "true"}, True),
    ("elasticfilesystem:ClientMount",
     f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/fs-9",
     {"elasticfilesystem:AccessedViaMountTarget": "true"}, False),
    ("kms:CreateGrant", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k-1",
     {"kms:ViaService": "ec2.us-east-1.amazonaws.com"}, True),
    ("kms:CreateGrant", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k-1",
     {"kms:ViaService": "s3.us-east-1.amazonaws.com"}, False),
    ("ec2:DescribeInstances", "*", {}, True),
    ("pricing:GetProducts", "*", {}, True),
    ("iam:GetRole", "*", {}, False),
]
# What no role of any cluster stack may do, whatever the tags: the controller's own policy,
# the controller document and the boundary all refuse it.
NEVER = [
    ("ec2:DeleteVolume", _ec2("volume", "vol-1")), ("ec2:AttachVolume", _ec2("volume", "v")),
    ("ec2:CreateVolume", _ec2("volume", "vol-1")),
    ("ec2:CreateSnapshot", "arn:aws:ec2:us-east-1::snapshot/snap-1"),
    ("ec2:DeleteSnapshot", "arn:aws:ec2:us-east-1::snapshot/snap-1"),
    ("ec2:StopInstances", _ec2("instance", "i-1")),
    ("ec2:ModifyInstanceAttribute", _ec2("instance", "i-1")),
    ("cloudformation:CreateStack", f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/x/1"),
    ("cloudformation:DeleteStack", f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/x/1"),
    ("ec2:CreateKeyPair", _ec2("key-pair", "k")), ("ec2:ImportKeyPair", _ec2("key-pair", "k")),
    ("ec2:DeleteKeyPair", _ec2("key-pair", "k")),
    ("ec2:CreateSecurityGroup", _ec2("security-group", "sg-1")),
    ("ec2:DeleteSecurityGroup", _ec2("security-group", "sg-1")),
    ("ec2:AuthorizeSecurityGroupIngress", _ec2("security-group", "sg-1")),
    ("ec2:DeleteLaunchTemplate", _ec2("launch-template", "lt-1")),
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/clusterkit/c1/x"),
    ("iam:DeleteRole", f"arn:aws:iam::{ACCOUNT}:role/clusterkit/c1/x"),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/clusterkit/c1/x"),
    ("iam:CreateInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/clusterkit/c1/x"),
    ("elasticfilesystem:CreateFileSystem",
     f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/*"),
    ("elasticfilesystem:DeleteFileSystem",
     f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/fs-3"),
    ("elasticfilesystem:ClientRootAccess",
     f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/fs-3"),
    ("s3:GetObject", "arn:aws:s3:::bucket/key"),
]


def test_the_controller_role_of_a_stack_reaches_only_its_clusters_instances(iam_policy):
    """The template's ControllerRole as one cluster's stack makes it: each request it
    allows, the shipped controller document and the boundary allow too (else the
    boundary would break recovery on AWS); what it must never do, none of them allows."""
    stack = {"Statement": iam_policy.role_statements("ControllerRole", STACK_VALUES)}
    documents = [json.loads(controller_policy_text(CLUSTER)), policy(PolicyRole.NODE)]
    for action, resource, context, expected in CONTROLLER_CHECKS:
        assert allowed(stack, action, resource, context) is expected, (action, resource,
                                                                       context)
        if expected:
            context = {**context, "aws:PrincipalAccount": ACCOUNT}
            for doc in documents:
                assert allowed(doc, action, resource, context), (action, resource)
    tags = {**_tag("ResourceTag"), **_tag("RequestTag"), "ec2:CreateAction": "RunInstances"}
    for action, resource in NEVER:
        for doc in (stack, *documents):
            assert not allowed(doc, action, resource, tags), (action, resource)


def test_the_controller_writes_only_the_tag_keys_clusterkit_writes_on_a_node(iam_policy):
    """TagClusterResources' aws:TagKeys are the keys of a node's identity tags (role tags,
    a standby swapped in), never clusterkit:cluster (issue 39: a master could move
    itself into another cluster's `train` and `exec -A`)."""
    from clusterkit.kinds import Role
    from clusterkit.plan.nodes import CLUSTER_TAG, role_tags, swap_tags, wanted_tags

    stack = iam_policy.role_statements("ControllerRole", STACK_VALUES)
    [tagging] = [s for s in stack if s["Sid"] == "TagClusterResources"]
    keys = tagging["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"]
    written = {*wanted_tags(CLUSTER, 0), *role_tags(CLUSTER, Role.WORKER),
               *swap_tags(CLUSTER, 1)[0]}
    assert set(keys) == written and CLUSTER_TAG not in keys


def test_template_values_become_patterns(iam_policy):
    resources = {"R": {"Type": "AWS::IAM::Role",
                       "Properties": {"Path": {"Fn::Sub": "/p/${Name}/"}}}}
    resolve = iam_policy._resolve
    assert resolve({"Fn::GetAtt": ["R", "Arn"]}, None, resources) == "arn:aws:iam::*:role/p/*/*"
    assert resolve({"Fn::Sub": "arn:${AWS::Partition}:x:${AWS::Region}:${AWS::AccountId}:"
                               "${!Literal}"}, None, resources) == "arn:aws:x:*:*:${Literal}"
    assert resolve({"Ref": "AWS::AccountId"}, None, resources, True) == \
        "${aws:PrincipalAccount}"
    either = {"Fn::If": ["C", {"Fn::Sub": "a/${X}"}, {"Fn::Sub": "b/${Y}"}]}
    assert resolve(either, None, resources) == ["a/*", "b/*"]
    assert resolve(either, {"X": "1", "Y": "2"}, resources) == ["a/1", "b/2"]
    assert resolve([{"Fn::If": ["C", 1, {"Ref": "AWS::NoValue"}]}], None, resources) == [1]
    split = {"Fn::Split": [",", {"Ref": "T"}]}
    assert resolve(split, {"T": "a,b"}, resources) == ["a", "b"]
    assert resolve(split, None, resources) == "*"
    with pytest.raises(SystemExit, match="no value given for Y"):
        resolve({"Fn::Sub": "${Y}"}, {}, resources)
    assert iam_policy._pattern_condition({"StringEquals": {"a": "*", "b": "x"}}) == {
        "StringLike": {"a": "*"}, "StringEquals": {"b": "x"}}


def test_every_named_aws_call_is_allowed_but_the_iam_sweep(iam_policy):
    """aws_call("Operation", ...) names the operation of every call in clusterkit/aws:
    each one is granted to the user; of the code's calls, only the IAM deletes of the
    leftover-role sweep are not (the service role deletes the stack's roles)."""
    named = set()
    for path in (ROOT / "clusterkit/aws").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "aws_call"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).isalpha()):
                named.add(node.args[0].value)
    granted = _granted(user_documents())
    assert len(named) > 30
    assert named - {a.split(":")[1] for a in granted} == set()
    left = iam_policy.code_actions() - granted
    assert all(a.startswith("iam:") and not READ.match(a) for a in left), left
    for action in ("ec2:RunInstances", "ec2:TerminateInstances", "ebs:PutSnapshotBlock",
                   "ebs:StartSnapshot", "cloudformation:CreateStack", "iam:PassRole",
                   "elasticfilesystem:CreateMountTarget", "pricing:GetProducts"):
        assert action in granted, action
    assert not any(a.startswith("efs:") for a in granted)  # IAM's prefix, not botocore's


def test_a_write_no_rule_narrows_fails(iam_policy):
    with pytest.raises(SystemExit, match="ec2:DeleteVpc"):
        iam_policy._ruled({"ec2:DeleteVpc", "ec2:DescribeVpcs"}, iam_policy.USER_RULES, "user")


def test_a_template_type_no_rule_covers_fails(iam_policy, tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")
    assert iam_policy.stack_resource_types(template) == {"AWS::SQS::Queue"}
    needed = iam_policy.stack_actions(template)
    assert "sqs:CreateQueue" in needed
    with pytest.raises(SystemExit, match="sqs:CreateQueue"):
        iam_policy._ruled(needed, iam_policy.SERVICE_RULES, "service role")


def test_the_evaluator_reads_conditions_as_iam_does():
    doc: dict[str, Any] = {"Statement": [{
        "Effect": "Allow", "Action": "ec2:CreateVolume", "Resource": "arn:aws:ec2:*::snapshot/*",
        "Condition": {"StringNotEquals": {"ec2:Owner": "${aws:PrincipalAccount}"}}}]}
    snap = "arn:aws:ec2:us-east-1::snapshot/snap-1"
    assert allowed(doc, "ec2:CreateVolume", snap, {"ec2:Owner": "1", "aws:PrincipalAccount": "2"})
    assert not allowed(doc, "ec2:CreateVolume", snap,
                       {"ec2:Owner": "2", "aws:PrincipalAccount": "2"})
    assert not allowed(doc, "ec2:DeleteVolume", snap, {})
    # ${*} in a Resource is a literal "*": the id of what the request creates, no other
    new: dict[str, Any] = {"Statement": [{
        "Effect": "Allow", "Action": "ec2:CopySnapshot",
        "Resource": "arn:aws:ec2:*::snapshot/${*}",
        "Condition": {"Bool": {"aws:ViaAWSService": "true"}}}]}
    via = {"aws:ViaAWSService": "true"}
    assert allowed(new, "ec2:CopySnapshot", "arn:aws:ec2:us-east-1::snapshot/*", via)
    assert not allowed(new, "ec2:CopySnapshot", snap, via)
    assert not allowed(new, "ec2:CopySnapshot", "arn:aws:ec2:us-east-1::snapshot/*",
                       {"aws:ViaAWSService": "false"})
    assert not allowed(new, "ec2:CopySnapshot", "arn:aws:ec2:us-east-1::snapshot/*", {})
    assert _resource_like("arn:aws:x:::a${?}${$}", "arn:aws:x:::a?$")
    assert not _resource_like("arn:aws:x:::a${?}", "arn:aws:x:::ab")


def test_the_controller_policy_names_its_cluster(iam_policy):
    """`iam-policy --role controller` printed the node boundary (any cluster's tag) while
    README says the controller's policy names its cluster (issue 36): the shipped file is
    a template, CLUSTER_PLACEHOLDER in every place the stack puts the cluster's name,
    and `--cluster NAME` fills it in exactly as the script makes that cluster's."""
    template = policy(PolicyRole.CONTROLLER)
    assert template != policy(PolicyRole.NODE)
    text = json.dumps(template)
    # (9 since issue 41: the list of its cluster's instance profiles, ClusterProfiles)
    assert text.count(CLUSTER_PLACEHOLDER) == 9 and '"aws:ResourceTag/clusterkit:cluster": ' \
        '"*"' not in text and '"aws:RequestTag/clusterkit:cluster": "*"' not in text
    assert iam_policy.controller_policy() == template
    c1 = json.loads(controller_policy_text(CLUSTER))
    assert c1 == iam_policy.controller_policy(CLUSTER)
    assert CLUSTER_PLACEHOLDER not in json.dumps(c1)
    pass_role = next(s for s in c1["Statement"] if s["Sid"] == "PassNodeRole")
    assert pass_role["Resource"] == f"arn:aws:iam::*:role/clusterkit/{CLUSTER}/*"
    for action, resource, context, expected in CONTROLLER_CHECKS:  # another cluster's
        if context.get("aws:ResourceTag/clusterkit:cluster") == "c2" or \
                context.get("aws:RequestTag/clusterkit:cluster") == "c2":
            assert not expected and not allowed(c1, action, resource, context), action
