"""`clusterkit iam-policy`: prints the shipped policies (no AWS call, no cfn-lint), and
with --stack a CloudFormation template for the service role that cfn-lint passes."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from clusterkit.aws.servicerole import BOUNDARY_NAME, ROLE_NAME, SERVICE_PATH
from clusterkit.cli.main import cli
from clusterkit.cluster.ops.iampolicy import CLUSTER_PLACEHOLDER, PolicyRole, policy
from tests import support


def _run(*args: str):
    return CliRunner().invoke(cli, ["iam-policy", *args], catch_exceptions=False)


def test_each_role_prints_its_policy():
    assert json.loads(_run().output) == policy(PolicyRole.USER)
    for role in PolicyRole:
        result = _run("--role", role.value)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == policy(role)
    assert policy(PolicyRole.USER) != policy(PolicyRole.CLOUDFORMATION)


def test_the_controller_policy_is_a_template_or_one_clusters():
    """Without --cluster the controller's policy says it is a template (on stderr: stdout
    stays the JSON); with it, the cluster's name is in every condition on the tag."""
    template = _run("--role", "controller")
    assert f"a template: {CLUSTER_PLACEHOLDER} stands for the cluster's name" in \
        template.stderr
    assert CLUSTER_PLACEHOLDER in template.stdout
    demo = _run("--role", "controller", "--cluster", "demo")
    assert demo.exit_code == 0 and demo.stderr == ""
    assert json.loads(demo.stdout) == json.loads(
        template.stdout.replace(CLUSTER_PLACEHOLDER, "demo"))
    assert '"aws:ResourceTag/clusterkit:cluster": "demo"' in demo.stdout
    for args, said in ((["--role", "user", "--cluster", "demo"], "--cluster names the cluster"),
                       (["--role", "controller", "--cluster", "Bad_Name"],
                        "not a cluster name")):
        refused = CliRunner().invoke(cli, ["iam-policy", *args])
        assert refused.exit_code == 2 and said in refused.output, refused.output


def test_the_node_document_says_it_is_a_boundary():
    """`--role node` is the boundary of every cluster's roles (any cluster): stderr says
    to give it to no role; stdout stays the JSON."""
    node = _run("--role", "node")
    assert node.exit_code == 0 and json.loads(node.stdout) == policy(PolicyRole.NODE)
    assert "a permissions boundary, not a role's policy" in node.stderr
    assert "--role controller --cluster NAME" in node.stderr
    assert _run("--role", "user").stderr == ""


def test_the_service_role_stack_passes_cfn_lint(tmp_path):
    result = _run("--role", "cloudformation", "--stack")
    assert result.exit_code == 0, result.output
    text = result.output
    assert f"RoleName: {ROLE_NAME}" in text and f"ManagedPolicyName: {BOUNDARY_NAME}" in text
    assert f"Path: {SERVICE_PATH}" in text
    assert json.dumps(policy(PolicyRole.CLOUDFORMATION), indent=2).splitlines()[3].strip() \
        in text
    template = tmp_path / "iam-for-clusterkit.yaml"
    template.write_text(text)
    proc = subprocess.run([support.require_tool("cfn-lint"), str(template)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stack_goes_only_with_the_cloudformation_role():
    result = CliRunner().invoke(cli, ["iam-policy", "--stack"])
    assert result.exit_code == 2
    assert "--role cloudformation" in result.output
