"""`clusterkit plan`, `up`, `status`, `down`: option wiring only."""

import sys

import click

from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cli.remote import accept_option
from clusterkit.cli.render import print_json
from clusterkit.cluster.common import Runtime
from clusterkit.errors import ClusterkitError

TIMEOUT_HELP = "Give up waiting after this many seconds (default 1800)."


def _runtime(region: str | None = None) -> Runtime:
    ctx = get_ctx()
    return Runtime.make(region=region or ctx.region, profile=ctx.profile, console=ctx.console)


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--offline", is_flag=True,
              help="No AWS calls: shipped catalog and price snapshot, assumes a new cluster.")
@json_option
def plan(spec_file: str, offline: bool) -> None:
    """Show what `up` would create or change, the chosen offer and total $/h. Read-only."""
    from clusterkit.cluster.planning import do_plan

    ctx = get_ctx()
    _, lines, data = do_plan(spec_file, offline=offline, profile=ctx.profile,
                             rt=None if offline else _runtime(), region=ctx.region)
    if ctx.json:
        print_json(data)
    else:
        for line in lines:
            ctx.console.print(line, highlight=False, markup=False)


def _ask(question: str) -> bool:
    """A yes/no question on the terminal; Ctrl-C or end of input at it means no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.exceptions.Abort:
        return False


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@click.option("--no-wait-ssh", is_flag=True, help="Return once the nodes run, without "
              "waiting for SSH.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before spending (needed "
              "without a terminal).")
@accept_option
@json_option
def up(spec_file: str, timeout: float, no_wait_ssh: bool, yes: bool,
       accept_host_keys: tuple[str, ...]) -> None:
    """Provision the cluster, wait for SSH. Idempotent: a second run changes nothing.

    Shows what it will create and what that costs, then asks (--yes skips the question;
    with no terminal and no --yes it refuses). A changed node count is applied; a changed
    instance type, market, region or image is refused (`down` first)."""
    from clusterkit.cluster.up import do_up

    ctx = get_ctx()
    ask = _ask if sys.stdin.isatty() else None
    result = do_up(spec_file, rt=_runtime(), timeout=timeout, wait_ssh=not no_wait_ssh,
                   yes=yes or ctx.yes, confirm=ask, region=ctx.region,
                   accept_host_keys=accept_host_keys)
    if ctx.json:
        print_json(result)


@click.command()
@click.argument("name", required=False, callback=check_target_argument)
@click.option("--wide", is_flag=True, help="Every column (instance id, addresses, region).")
@json_option
def status(name: str | None, wide: bool) -> None:
    """Nodes, roles, AZ, market, addresses, state and cost so far (found by tags).

    NAME is a cluster name (looked up in --region) or a spec file (its regions); without
    NAME every clusterkit cluster in --region is listed."""
    from clusterkit.cluster.status import do_status, render

    ctx = get_ctx()
    rt = _runtime()
    result = do_status(name, region=ctx.region, rt=rt)
    if name and not result["nodes"]:  # not found: exit 1 (JSON error under --json)
        raise ClusterkitError(f"no cluster {result['cluster'] or name} in "
                              f"{', '.join(result['regions'])}",
                              "check the name and --region; `clusterkit status` lists "
                              "every cluster")
    if ctx.json:
        print_json(result)
    else:
        render(rt, result, wide=wide)


@click.command()
@click.argument("target", metavar="SPEC|NAME", callback=check_target_argument)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@click.option("--delete-efs", is_flag=True, help="Also delete the EFS file systems the "
              "cluster keeps (deletion_policy: retain), after confirmation.")
@json_option
def down(target: str, yes: bool, timeout: float, delete_efs: bool) -> None:
    """Delete everything the cluster owns (by spec file or NAME); nothing orphaned.

    The cluster is found through its local record (written by `up`), else by a tag
    search of every enabled region; --region narrows the search. Declining the question
    exits 1 with nothing deleted."""
    from clusterkit.cluster.down import do_down

    ctx = get_ctx()
    result = do_down(target, yes=yes or ctx.yes, region=ctx.region, rt=_runtime(),
                     confirm=_ask, timeout=timeout, delete_efs=delete_efs)
    if ctx.json:
        print_json(result)


COMMANDS = [plan, up, status, down]
