"""`clusterkit iam-policy`."""

from __future__ import annotations

import click

from clusterkit.cluster.ops.iampolicy import PolicyRole, policy_text, service_role_stack
from clusterkit.errors import UsageError


@click.command("iam-policy")
@click.option("--role", "role", type=click.Choice([r.value for r in PolicyRole]),
              default=PolicyRole.USER.value, show_default=True,
              help="user: what you need to run clusterkit; cloudformation: the service role "
                   "the cluster stacks run as; controller: the master's role while a "
                   "detached job may recover (replaces lost nodes); node: the boundary of "
                   "every role the stacks create (the nodes' role is its EFS part).")
@click.option("--stack", is_flag=True,
              help="With --role cloudformation: print a CloudFormation template that "
                   "creates the service role and the node boundary, once per account.")
def iam_policy(role: str, stack: bool) -> None:
    """Print an IAM policy clusterkit needs (JSON), or the service role's stack.

    No AWS call. The policies are generated from clusterkit's code and its stack template.

    \b
    Examples:
      clusterkit iam-policy > clusterkit-user.json
      clusterkit iam-policy --role cloudformation --stack > iam-for-clusterkit.yaml
      aws cloudformation deploy --stack-name iam-for-clusterkit \\
        --template-file iam-for-clusterkit.yaml --capabilities CAPABILITY_NAMED_IAM
    """
    if stack and role != PolicyRole.CLOUDFORMATION.value:
        raise UsageError("--stack prints the service role's stack: it goes with "
                         "--role cloudformation", "clusterkit iam-policy --role "
                         "cloudformation --stack")
    text = service_role_stack() if stack else policy_text(PolicyRole(role))
    click.echo(text, nl=False)


COMMANDS = [iam_policy]
