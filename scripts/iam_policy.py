"""The IAM policy clusterkit needs, generated from the calls its code makes.

    python scripts/iam_policy.py            # print the policy document (JSON)
    python scripts/iam_policy.py --write    # rewrite docs/iam-policy.json
    python scripts/iam_policy.py --check    # exit 1 if docs/iam-policy.json is stale

Only clusterkit/aws/ may import boto3 (tests/unit/test_layers.py), so every AWS call
is in that package. Its sources are parsed (AST): every service name written there as
a string ("ec2", "iam", ...) and every name that is a client method (``x.run_instances``)
or a method name handed over as text (``get_paginator("describe_volumes")``,
``_call(session, "iam", None, "delete_role")``) is matched against botocore's model of
the services named in the same file; a match is one IAM action (service prefix from the
model's signing name, action = the operation name).

CloudFormation creates the stack's resources with the caller's permissions, so the
actions for each resource type in clusterkit/resources/cluster.yaml come from
STACK_ACTIONS below; a resource type missing there fails the script (and its test).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[1]
AWS_PACKAGE = ROOT / "clusterkit" / "aws"
TEMPLATE = ROOT / "clusterkit" / "resources" / "cluster.yaml"
POLICY_FILE = ROOT / "docs" / "iam-policy.json"

# What CloudFormation does, as the caller, for each resource type of the stack template
# (create, read, update, tag, delete).
STACK_ACTIONS: dict[str, tuple[str, ...]] = {
    "AWS::EC2::SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups",
        "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress", "ec2:CreateTags",
        "ec2:DeleteTags"),
    "AWS::EC2::SecurityGroupIngress": (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
        "ec2:DescribeSecurityGroups", "ec2:DescribeSecurityGroupRules"),
    "AWS::EC2::PlacementGroup": (
        "ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "ec2:DescribePlacementGroups",
        "ec2:CreateTags"),
    "AWS::EC2::LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion",
        "ec2:ModifyLaunchTemplate", "ec2:DeleteLaunchTemplate",
        "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
        "ec2:CreateTags", "iam:PassRole"),
    "AWS::IAM::Role": (
        "iam:CreateRole", "iam:DeleteRole", "iam:GetRole", "iam:UpdateRole",
        "iam:UpdateAssumeRolePolicy", "iam:PutRolePolicy", "iam:GetRolePolicy",
        "iam:DeleteRolePolicy", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies",
        "iam:TagRole", "iam:UntagRole"),
    "AWS::IAM::InstanceProfile": (
        "iam:CreateInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile",
        "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"),
    "AWS::EFS::FileSystem": (
        "elasticfilesystem:CreateFileSystem", "elasticfilesystem:DeleteFileSystem",
        "elasticfilesystem:DescribeFileSystems", "elasticfilesystem:TagResource",
        "elasticfilesystem:UntagResource", "elasticfilesystem:ListTagsForResource"),
}
# Needed without a call of its own: nodes get the stack's instance profile (RunInstances
# passes its role), and the first spot launch of an account creates EC2's spot
# service-linked role.
EXTRA_ACTIONS = ("iam:PassRole", "iam:CreateServiceLinkedRole")


def _names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(string constants, attribute names) of one module."""
    texts = {n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return texts, attrs


def code_actions(package: Path = AWS_PACKAGE) -> set[str]:
    """IAM actions of every AWS operation the modules of ``package`` can call."""
    session = botocore.session.get_session()
    available = set(session.get_available_services())
    models: dict[str, tuple[str, dict[str, str]]] = {}
    actions: set[str] = set()
    for path in sorted(package.glob("*.py")):
        texts, attrs = _names(ast.parse(path.read_text(), str(path)))
        for service in sorted(texts & available):
            if service not in models:
                model = session.get_service_model(service)
                models[service] = (model.signing_name,
                                   {xform_name(op): op for op in model.operation_names})
            prefix, ops = models[service]
            actions |= {f"{prefix}:{ops[name]}" for name in (texts | attrs) & ops.keys()}
    return actions


def stack_resource_types(template: Path = TEMPLATE) -> set[str]:
    """The ``Type: AWS::...`` of every resource in the stack template."""
    text = ("\n" + template.read_text()).split("\nResources:", 1)[1].split("\nOutputs:", 1)[0]
    return set(re.findall(r"^ {4}Type: (AWS::[A-Za-z0-9:]+)\s*$", text, re.MULTILINE))


def stack_actions(template: Path = TEMPLATE) -> set[str]:
    types = stack_resource_types(template)
    unknown = sorted(types - STACK_ACTIONS.keys())
    if unknown:
        raise SystemExit(f"iam_policy.py: no actions known for {', '.join(unknown)}: "
                         "add them to STACK_ACTIONS")
    return {a for t in types for a in STACK_ACTIONS[t]}


def policy() -> dict:
    """The policy document: one statement per service, actions sorted."""
    by_service: dict[str, list[str]] = defaultdict(list)
    for action in sorted(code_actions() | stack_actions() | set(EXTRA_ACTIONS)):
        by_service[action.split(":")[0]].append(action)
    statements = [{"Sid": "Clusterkit" + re.sub(r"[^A-Za-z0-9]", "", prefix.title()),
                   "Effect": "Allow", "Action": actions, "Resource": "*"}
                  for prefix, actions in sorted(by_service.items())]
    return {"Version": "2012-10-17", "Statement": statements}


def render() -> str:
    return json.dumps(policy(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {POLICY_FILE}")
    group.add_argument("--check", action="store_true", help=f"exit 1 if {POLICY_FILE} is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        POLICY_FILE.write_text(text)
    elif args.check:
        if not POLICY_FILE.exists() or POLICY_FILE.read_text() != text:
            print(f"{POLICY_FILE} is stale: run python scripts/iam_policy.py --write",
                  file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
