"""scripts/iam_policy.py: the three shipped policies (user, CloudFormation service role,
node) are what the code and the stack template need today, and no more: every handler
permission of the template's resource types is granted to the service role, no write is
granted on ``*`` without a condition, the user holds no IAM write but PassRole (and the
spot service-linked role), and the cases in iam_policy_cases/ (policies as data: an
action on a resource, with a request context, allowed or not) hold."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import pytest

from clusterkit.aws.servicerole import ROLE_NAME, SERVICE_PATH
from clusterkit.cluster.ops.iampolicy import PolicyRole, policy, service_role_stack
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


def _like(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


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
            elif have is None:
                ok = op.startswith("StringNot")
            elif op in ("StringEquals", "Bool"):
                ok = have in wants
            elif op == "StringNotEquals":
                ok = have not in wants
            elif op == "StringLike":
                ok = any(_like(w, have) for w in wants)
            else:
                raise AssertionError(f"the test knows no condition operator {op}")
            if not ok:
                return False
    return True


def allowed(doc: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    return any(s["Effect"] == "Allow"
               and any(_like(a, action) for a in s["Action"])
               and any(_like(r, resource) for r in s["Resource"])
               and _condition_holds(s.get("Condition", {}), context)
               for s in _statements(doc))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_policy_case(case):
    data = json.loads(case.read_text())
    assert data["why"] and data["checks"]
    for check in data["checks"]:
        doc = policy(PolicyRole(check["role"]))
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


@pytest.mark.parametrize("role", list(PolicyRole), ids=lambda r: r.value)
def test_policy_fits_iam_limits(role):
    doc = policy(role)
    size = len(json.dumps(doc, separators=(",", ":")))
    assert size <= (INLINE_MAX if role is PolicyRole.CLOUDFORMATION else MANAGED_MAX), size
    sids = [s["Sid"] for s in doc["Statement"]]
    assert len(sids) == len(set(sids))
    for s in doc["Statement"]:
        assert s["Effect"] == "Allow" and s["Action"] == sorted(set(s["Action"]))


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
    assert {"iam:DeleteRolePermissionsBoundary"} == iam_policy.WITHHELD


def test_the_user_holds_no_iam_write_but_passing_two_roles():
    statements = _statements(policy(PolicyRole.USER))
    writes = {a for s in statements for a in s["Action"]
              if a.startswith("iam:") and not READ.match(a)}
    assert writes == {"iam:PassRole", "iam:CreateServiceLinkedRole"}
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


def test_node_policy_is_what_the_template_gives_the_nodes(iam_policy):
    granted = _granted(policy(PolicyRole.NODE))
    assert granted == iam_policy.node_actions() >= {"elasticfilesystem:ClientMount"}
    assert all(a.startswith("elasticfilesystem:Client") for a in granted)
    template = (ROOT / "templates/cluster.yaml").read_text()
    assert "PermissionsBoundary: !If [NodeRoleBounded, !Ref NodeRoleBoundary" in template


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
    granted = _granted(policy(PolicyRole.USER))
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
