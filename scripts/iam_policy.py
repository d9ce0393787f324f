"""The IAM policies clusterkit needs, generated from its code and its stack template.

    python scripts/iam_policy.py [--role user|user-read|cloudformation|node|controller] [--cluster NAME]
    python scripts/iam_policy.py --write    # rewrite docs/iam-policy*.json, docs/iam-service-role.yaml
    python scripts/iam_policy.py --check    # exit 1 if any of them is stale

- ``user``: what the person running clusterkit needs. Every AWS call is in clusterkit/aws/
  (tests/unit/test_layers.py); its sources are parsed (AST) and each client method or
  operation name written there is matched against botocore's model of the services named
  in the same file: one IAM action per match. Reads go on ``*``; every write must match a
  rule of USER_RULES (scripts/iam_rules.py: resource ARNs, tag conditions), else the
  script fails. The user's IAM writes are the cluster's instance profiles (tagged, under
  clusterkit's path) and passing its roles: CloudFormation makes the roles as the
  service role.
- ``user-read``: the user's reads (every Describe/List/Get the code calls, on ``*``), a
  managed policy of its own beside ``user``: the two together pass IAM's 6,144
  characters for one managed policy (``user`` was at 6,141 with issue 41's instance
  profiles), and each alone has room to grow. Attach both.
- ``cloudformation``: the service role CloudFormation runs as (RoleARN on the stack calls).
  Its actions are those of cfn-lint's resource schemas (``handlers.<op>.permissions``) for
  every resource type in the stack template, each narrowed by a rule of SERVICE_RULES.
- ``controller``: the role of the master's recovery controller, from the template's
  ControllerRole (its own and attached inline policies) as one cluster's stack makes it:
  ``--cluster NAME`` gives that cluster's; the shipped file is a template whose
  ``CLUSTER_NAME`` stands for the name (`clusterkit iam-policy --role controller --cluster
  NAME` fills it in). Its reads on ``*`` must be the user's, IAM's aside, else the
  script fails.
- ``node``: the permissions boundary the service role must put on every role it creates:
  the union of the template's roles (NodeRole, EFS only through its own policy, and
  ControllerRole) in any cluster's stack: a ceiling for every cluster, no role's policy. Template values become patterns: a region,
  account or cluster name any (``*``, a tag equal to the cluster's name: the tag
  present; the controller's cluster name aside), a role's ARN its path's.

The files are shipped as package data (clusterkit/resources/iam-*.json link to docs/), so
`clusterkit iam-policy` prints them without cfn-lint, a test-only dependency.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from iam_rules import (  # noqa: E402  (after the path: run as a file, or loaded by a test)
    SERVICE_RULES,
    USER_EXTRA,
    USER_RULES,
    WITHHELD,
    Rule,
    is_read,
)

from clusterkit.aws.servicerole import (  # noqa: E402
    BOUNDARY_NAME,
    ROLE_NAME,
    SERVICE_PATH,
    STACK_NAME,
)
from clusterkit.cluster.ops.iampolicy import CLUSTER_PLACEHOLDER  # noqa: E402

AWS_PACKAGE = ROOT / "clusterkit" / "aws"
TEMPLATE = ROOT / "templates" / "cluster.yaml"
DOCS = ROOT / "docs"
FILES = {"user": DOCS / "iam-policy.json",
         "user-read": DOCS / "iam-policy-user-read.json",
         "cloudformation": DOCS / "iam-policy-cloudformation.json",
         "node": DOCS / "iam-policy-node.json",
         "controller": DOCS / "iam-policy-controller.json"}
STACK_FILE = DOCS / "iam-service-role.yaml"
ROLES = tuple(FILES)
# The user's only IAM writes: passing the two roles, EC2's spot service-linked role, and
# the cluster's instance profiles (clusterkit/plan/profiles.py); the rest of the sweep's
# IAM deletes (a failed stack's roles) are the service role's.
USER_IAM_WRITES = frozenset({"iam:PassRole", "iam:CreateServiceLinkedRole",
                             "iam:CreateInstanceProfile", "iam:TagInstanceProfile",
                             "iam:AddRoleToInstanceProfile",
                             "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"})
CONTROLLER_ROLE = "ControllerRole"
SUB_NAME = re.compile(r"\$\{([^!}][^}]*)\}")  # ${Name}, ${Resource.Attribute}; ${!x} is literal
NO_VALUE = object()  # AWS::NoValue: the key or item is left out

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


def _template(template: Path = TEMPLATE) -> dict[str, Any]:
    from cfnlint.decode import decode_str

    parsed, matches = decode_str(template.read_text())
    if parsed is None:
        raise SystemExit(f"iam_policy.py: cannot parse {template}: {matches}")
    return parsed


def stack_resource_types(template: Path = TEMPLATE) -> set[str]:
    """The ``Type`` of every resource in the stack template."""
    return {str(r["Type"]) for r in _template(template)["Resources"].values()}


def _schema(resource_type: str) -> dict[str, Any]:
    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    index = json.loads((schemas / "providers" / "us-east-1.json").read_text())
    if resource_type not in index:
        raise SystemExit(f"iam_policy.py: cfn-lint knows no resource type {resource_type}")
    return json.loads((schemas / "resources" / f"{index[resource_type]}.json").read_text())


def handler_actions(resource_type: str) -> set[str]:
    """Every action of the type's create/read/update/delete/list handlers."""
    handlers = _schema(resource_type).get("handlers", {})
    return {a for h in handlers.values() for a in h.get("permissions", [])}


def stack_actions(template: Path = TEMPLATE) -> set[str]:
    return {a for t in stack_resource_types(template) for a in handler_actions(t)}


def _name(name: str, values: Mapping[str, str] | None, resources: Mapping[str, Any],
          in_condition: bool, fixed: Mapping[str, str] | None = None) -> str:
    """What ``${name}`` (or ``Ref: name``) is: ``values[name]``; without values,
    ``fixed[name]`` or a pattern of any value (a role's ARN: any under its path)."""
    if values is not None:
        if name not in values:
            raise SystemExit(f"iam_policy.py: no value given for {name}")
        return values[name]
    if fixed and name in fixed:
        return fixed[name]
    if name == "AWS::Partition":
        return "aws"
    if name == "AWS::AccountId" and in_condition:
        return "${aws:PrincipalAccount}"
    logical, _, attribute = name.partition(".")
    role = resources.get(logical, {})
    if attribute == "Arn" and role.get("Type") == "AWS::IAM::Role":
        path = _resolve(role["Properties"].get("Path", "/"), None, resources, fixed=fixed)
        return f"arn:aws:iam::*:role{path}*"
    return "*"


def _either(first: Any, second: Any) -> Any:
    """An ``Fn::If``: whichever branch holds (a list or value left out: the other)."""
    if first is NO_VALUE or first == second:
        return second
    if second is NO_VALUE:
        return first
    items = [*(first if isinstance(first, list) else [first]),
             *(second if isinstance(second, list) else [second])]
    return [x for i, x in enumerate(items) if x not in items[:i]]


def _resolve(node: Any, values: Mapping[str, str] | None, resources: Mapping[str, Any],
             in_condition: bool = False, fixed: Mapping[str, str] | None = None) -> Any:
    """A template value with its intrinsic functions resolved (see ``_name``)."""
    def again(x: Any, cond: bool = in_condition) -> Any:
        return _resolve(x, values, resources, cond, fixed)

    def name(text: str) -> str:
        return _name(text, values, resources, in_condition, fixed)

    if isinstance(node, list):
        return [v for v in (again(x) for x in node) if v is not NO_VALUE]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (key, value), = node.items()
        if key == "Ref":
            return NO_VALUE if value == "AWS::NoValue" else name(value)
        if key == "Fn::GetAtt":
            return name(".".join(value) if isinstance(value, list) else value)
        if key == "Fn::Sub":
            text = value[0] if isinstance(value, list) else value
            return SUB_NAME.sub(lambda m: name(m.group(1)), text).replace("${!", "${")
        if key == "Fn::If":
            return _either(again(value[1]), again(value[2]))
        if key == "Fn::Split":  # a pattern stays one
            parts = str(again(value[1])).split(value[0])
            return parts[0] if len(parts) == 1 else parts
    out = {k: again(v, in_condition or k == "Condition") for k, v in node.items()}
    return {k: v for k, v in out.items() if v is not NO_VALUE}


def _pattern_condition(condition: dict) -> dict:
    """A string comparison whose value became a pattern made a ``Like`` one."""
    out: dict[str, dict] = {}
    for op, keys in condition.items():
        for key, want in keys.items():
            pattern = any("*" in w for w in (want if isinstance(want, list) else [want]))
            like = op.replace("Equals", "Like") if pattern and op in (
                "StringEquals", "StringNotEquals") else op
            out.setdefault(like, {})[key] = want
    return out


def _roles() -> list[str]:
    """Logical ids of the template's roles, in its order."""
    return [k for k, r in _template()["Resources"].items() if r["Type"] == "AWS::IAM::Role"]


def role_statements(role: str, values: Mapping[str, str] | None = None,
                    fixed: Mapping[str, str] | None = None) -> list[dict]:
    """The statements the template's ``role`` is given (its ``Policies`` and the
    AWS::IAM::Policy resources naming it), resolved with ``values``; without values,
    as patterns every stack's role matches (``_name``), but for the ``fixed`` ones."""
    resources = _template()["Resources"]
    if resources.get(role, {}).get("Type") != "AWS::IAM::Role":
        raise SystemExit(f"iam_policy.py: the template has no role {role}")
    policies = _resolve(resources[role]["Properties"].get("Policies", []), values, resources,
                        fixed=fixed)
    documents = [p["PolicyDocument"] for p in policies]
    documents += [_resolve(r["Properties"]["PolicyDocument"], values, resources, fixed=fixed)
                  for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"].get("Roles", [])]
    statements = []
    for doc in documents:
        for s in doc["Statement"]:
            if "Sid" not in s:
                raise SystemExit(f"iam_policy.py: a statement of {role} has no Sid")
            listed = [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]
            condition = s.get("Condition")
            if condition and values is None:
                condition = _pattern_condition(condition)
            statements.append(_statement(
                s["Sid"], [s["Action"]] if isinstance(s["Action"], str) else s["Action"],
                [r for i, r in enumerate(listed) if r not in listed[:i]], condition))
    return statements


def _covers(pattern: str, action: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), action) is not None


def _statement(sid: str, actions: Iterable[str], resources: list[str],
               condition: dict | None) -> dict:
    out: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(set(actions)),
                           "Resource": resources[0] if len(resources) == 1 else resources}
    if condition:
        out["Condition"] = condition
    return out


def _ruled(needed: set[str], rules: tuple[Rule, ...], who: str) -> list[dict]:
    """The read statement and one statement per rule that grants a needed write action;
    a needed write no rule names fails."""
    writes = {a for a in needed if not is_read(a)}
    unruled = sorted(a for a in writes
                     if not any(_covers(p, a) for _, acts, _, _ in rules for p in acts))
    if unruled:
        raise SystemExit(f"iam_policy.py: no {who} rule for {', '.join(unruled)}: add one")
    statements = [_statement("Read", sorted(needed - writes), ["*"], None)]
    for sid, acts, resources, condition in rules:
        granted = {a for a in writes if any(_covers(p, a) for p in acts)}
        if granted:
            statements.append(_statement(sid, granted, resources, condition))
    return statements


def _document(statements: list[dict]) -> dict:
    return {"Version": "2012-10-17", "Statement": statements}


def _user_statements() -> list[dict]:
    needed = code_actions() | USER_EXTRA
    needed -= {a for a in needed if a.startswith("iam:") and not is_read(a)
               and a not in USER_IAM_WRITES}
    return _ruled(needed, USER_RULES, "user")


def user_policy() -> dict:
    """The user's writes, each confined by its rule (the reads: ``user_read_policy``)."""
    return _document([s for s in _user_statements() if s["Sid"] != "Read"])


def user_read_policy() -> dict:
    """The user's reads on ``*``: a managed policy of its own (see the module's note)."""
    return _document([s for s in _user_statements() if s["Sid"] == "Read"])


# Types an older clusterkit's stack holds and this template does not: an update deletes
# them (their delete handler's actions only).
RETIRED_TYPES = ("AWS::IAM::InstanceProfile",)


def retired_actions() -> set[str]:
    return {a for t in RETIRED_TYPES
            for a in _schema(t).get("handlers", {}).get("delete", {}).get("permissions", [])}


def cloudformation_policy() -> dict:
    return _document(_ruled((stack_actions() | retired_actions()) - WITHHELD, SERVICE_RULES,
                            "service role"))


def node_policy() -> dict:
    """The boundary of every role the service role creates: what any of the template's
    roles may do at most (a statement two roles share, by Sid, once)."""
    merged: dict[str, dict] = {}
    for role in _roles():
        for s in role_statements(role):
            if merged.setdefault(s["Sid"], s) != s:
                raise SystemExit(f"iam_policy.py: statement {s['Sid']} differs between "
                                 "the template's roles: give one of them another Sid")
    return _document(list(merged.values()))


def controller_reads() -> set[str]:
    """What the recovery controller reads: what `up` reads, the user's, IAM's aside."""
    return {a for s in user_read_policy()["Statement"]
            for a in s["Action"] if not a.startswith("iam:")}


def controller_policy(cluster: str = CLUSTER_PLACEHOLDER) -> dict:
    """The master's recovery controller: the template's ControllerRole in the stack of
    ``cluster`` (any region and account), whose reads must be ``controller_reads()``.
    The default, ``CLUSTER_PLACEHOLDER``, is no cluster's name: the shipped template."""
    statements = role_statements(CONTROLLER_ROLE, fixed={"ClusterName": cluster})
    reads = {a for s in statements if s["Resource"] == "*" for a in s["Action"]}
    wanted = controller_reads()
    if reads != wanted:
        raise SystemExit(f"iam_policy.py: {CONTROLLER_ROLE}'s reads on * in {TEMPLATE.name} "
                         f"are not the user's (IAM's aside): add {sorted(wanted - reads)}, "
                         f"remove {sorted(reads - wanted)}")
    return _document(statements)


def policy(role: str = "user", cluster: str | None = None) -> dict:
    """``role``'s policy; ``cluster``: the controller's of that cluster."""
    if cluster is not None:
        return controller_policy(cluster)
    return {"user": user_policy, "user-read": user_read_policy,
            "cloudformation": cloudformation_policy,
            "node": node_policy, "controller": controller_policy}[role]()


def render(role: str = "user", cluster: str | None = None) -> str:
    return json.dumps(policy(role, cluster), indent=2) + "\n"


def service_role_stack(cloudformation: dict, node: dict) -> str:
    """A template that creates the service role and the node boundary, once per account."""
    def block(doc: dict, indent: int) -> str:
        pad = " " * indent
        return "\n".join(pad + line for line in json.dumps(doc, indent=2).splitlines())

    return f"""AWSTemplateFormatVersion: "2010-09-09"
Description: >-
  clusterkit, once per account: the role CloudFormation runs clusterkit's cluster stacks
  as ({ROLE_NAME}), and the permissions boundary of the roles it creates (nodes,
  recovery controller: {BOUNDARY_NAME}). Generated by scripts/iam_policy.py; deploy it with
  `aws cloudformation deploy --stack-name {STACK_NAME} --template-file FILE
  --capabilities CAPABILITY_NAMED_IAM`.

Resources:
  NodeBoundary:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      ManagedPolicyName: {BOUNDARY_NAME}
      Path: {SERVICE_PATH}
      Description: Ceiling of every role a clusterkit stack creates (nodes, recovery controller).
      PolicyDocument:
{block(node, 8)}

  ServiceRole:
    Type: AWS::IAM::Role
    Properties:
      RoleName: {ROLE_NAME}
      Path: {SERVICE_PATH}
      Description: CloudFormation runs clusterkit's cluster stacks as this role.
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {{Service: cloudformation.amazonaws.com}}
            Action: sts:AssumeRole
      Policies:
        - PolicyName: clusterkit-stacks
          PolicyDocument:
{block(cloudformation, 12)}

Outputs:
  ServiceRoleArn:
    Value: !GetAtt ServiceRole.Arn
  NodeBoundaryArn:
    Value: !Ref NodeBoundary
"""


def rendered() -> dict[Path, str]:
    """Every generated file and its text."""
    out = {FILES[role]: render(role) for role in ROLES}
    out[STACK_FILE] = service_role_stack(policy("cloudformation"), policy("node"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=ROLES, default="user", help="the policy to print")
    parser.add_argument("--cluster", help="with --role controller: that cluster's")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the generated files")
    group.add_argument("--check", action="store_true", help="exit 1 if any is stale")
    args = parser.parse_args(argv)
    if args.cluster is not None and args.role != "controller":
        parser.error("--cluster goes with --role controller")
    if not (args.write or args.check):
        sys.stdout.write(render(args.role, args.cluster))
        return 0
    texts = rendered()
    stale = [path for path, text in texts.items()
             if not path.exists() or path.read_text() != text]
    if args.write:
        for path in stale:
            path.write_text(texts[path])
    elif stale:
        print(f"stale: {', '.join(p.name for p in stale)}: run "
              "python scripts/iam_policy.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
