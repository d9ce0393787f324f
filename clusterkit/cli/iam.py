"""`clusterkit iam-policy`."""

from __future__ import annotations

import click

from clusterkit.cli.context import get_ctx
from clusterkit.cluster.ops.iampolicy import (
    CLUSTER_PLACEHOLDER,
    PolicyRole,
    controller_policy_text,
    policy_text,
    service_role_stack,
)
from clusterkit.errors import UsageError


@click.command("iam-policy")
@click.option("--role", "role", type=click.Choice([r.value for r in PolicyRole]),
              default=PolicyRole.USER.value, show_default=True,
              help="user: what you need to run clusterkit (its writes); user-read: and "
                   "its reads (a second managed policy: the two pass IAM's 6,144 characters "
                   "for one; attach both); cloudformation: the service role "
                   "the cluster stacks run as; controller: the master's role while a "
                   "detached job may recover (replaces lost nodes), in one cluster's stack "
                   "(--cluster); node: the boundary of every role the stacks create (the "
                   "nodes' role is its EFS part).")
@click.option("--cluster", "cluster", metavar="NAME", default=None,
              help="With --role controller: the policy of cluster NAME's controller "
                   f"(without it: a template, {CLUSTER_PLACEHOLDER} standing for the name).")
@click.option("--stack", is_flag=True,
              help="With --role cloudformation: print a CloudFormation template that "
                   "creates the service role and the node boundary, once per account.")
def iam_policy(role: str, cluster: str | None, stack: bool) -> None:
    """Print an IAM policy clusterkit needs (JSON), or the service role's stack.

    No AWS call. The policies are generated from clusterkit's code and its stack template.

    \b
    Examples:
      clusterkit iam-policy > clusterkit-user.json
      clusterkit iam-policy --role user-read > clusterkit-user-read.json
      clusterkit iam-policy --role controller --cluster demo
      clusterkit iam-policy --role cloudformation --stack > iam-for-clusterkit.yaml
      aws cloudformation deploy --stack-name iam-for-clusterkit \\
        --template-file iam-for-clusterkit.yaml --capabilities CAPABILITY_NAMED_IAM
    """
    if stack and role != PolicyRole.CLOUDFORMATION.value:
        raise UsageError("--stack prints the service role's stack: it goes with "
                         "--role cloudformation", "clusterkit iam-policy --role "
                         "cloudformation --stack")
    if cluster is not None and role != PolicyRole.CONTROLLER.value:
        raise UsageError(f"--cluster names the cluster of the controller's policy: --role "
                         f"{role} is the same for every cluster",
                         "clusterkit iam-policy --role controller --cluster NAME")
    if stack:
        text = service_role_stack()
    elif cluster is not None:
        text = controller_policy_text(cluster)
    else:
        text = policy_text(PolicyRole(role))
    if role == PolicyRole.CONTROLLER.value and cluster is None:
        get_ctx().err_console.print(
            f"a template: {CLUSTER_PLACEHOLDER} stands for the cluster's name (`--cluster "
            "NAME` fills it in); each cluster's stack gives its controller this policy with "
            "its own name", markup=False, highlight=False)
    elif role == PolicyRole.NODE.value:
        get_ctx().err_console.print(
            "a permissions boundary, not a role's policy: the ceiling of every role a "
            "cluster stack creates, for any cluster (any cluster's tag, every role under "
            "/clusterkit/); give it to no role (a cluster's controller: `--role controller "
            "--cluster NAME`)", markup=False, highlight=False)
    click.echo(text, nl=False)


COMMANDS = [iam_policy]
