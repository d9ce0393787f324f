"""scripts/iam_policy.py: the shipped docs/iam-policy.json is what the code needs today,
and every operation clusterkit names in an aws_call is in it."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def iam_policy():
    spec = importlib.util.spec_from_file_location("iam_policy", ROOT / "scripts/iam_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _actions(policy: dict) -> set[str]:
    return {a for s in policy["Statement"] for a in s["Action"]}


def test_shipped_policy_is_the_generated_one(iam_policy):
    shipped = (ROOT / "docs/iam-policy.json").read_text()
    assert shipped == iam_policy.render(), "run: python scripts/iam_policy.py --write"
    assert iam_policy.main(["--check"]) == 0


def test_every_named_aws_call_is_allowed(iam_policy):
    """aws_call("Operation", ...) names the operation of every call in clusterkit/aws:
    each one that is an operation of a service clusterkit uses must be in the policy."""
    named = set()
    for path in (ROOT / "clusterkit/aws").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "aws_call"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).isalpha()):
                named.add(node.args[0].value)
    allowed = {a.split(":")[1] for a in _actions(iam_policy.policy())}
    assert len(named) > 30
    assert named - allowed == set()


def test_policy_covers_the_pipeline_and_the_stack(iam_policy):
    actions = _actions(iam_policy.policy())
    for action in ("ec2:RunInstances", "ec2:TerminateInstances", "ebs:PutSnapshotBlock",
                   "ebs:StartSnapshot", "cloudformation:CreateStack", "iam:PassRole",
                   "iam:DeleteRole", "elasticfilesystem:CreateMountTarget",
                   "ec2:CreateSecurityGroup", "ec2:CreateLaunchTemplate", "pricing:GetProducts"):
        assert action in actions, action
    # service prefixes are IAM's (efs signs as elasticfilesystem), not botocore's names
    assert not any(a.startswith("efs:") for a in actions)
    assert [s["Sid"] for s in iam_policy.policy()["Statement"]] == sorted(
        s["Sid"] for s in iam_policy.policy()["Statement"])


def test_a_template_resource_without_actions_fails(iam_policy, tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("Resources:\n  Q:\n    Type: AWS::SQS::Queue\nOutputs: {}\n")
    assert iam_policy.stack_resource_types(template) == {"AWS::SQS::Queue"}
    with pytest.raises(SystemExit, match="AWS::SQS::Queue"):
        iam_policy.stack_actions(template)


def test_every_stack_resource_type_is_mapped(iam_policy):
    types = iam_policy.stack_resource_types()
    assert {"AWS::IAM::Role", "AWS::EC2::LaunchTemplate", "AWS::EFS::FileSystem"} <= types
    assert types <= iam_policy.STACK_ACTIONS.keys()


def test_policy_json_is_a_valid_document():
    policy = json.loads((ROOT / "docs/iam-policy.json").read_text())
    assert policy["Version"] == "2012-10-17"
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and statement["Resource"] == "*"
        assert statement["Action"] == sorted(set(statement["Action"]))
