"""`clusterkit plan`, `up`, `status`, `down`: option wiring only."""

import click

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.render import print_json
from clusterkit.cluster.common import Runtime

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
                             rt=None if offline else _runtime())
    if ctx.json:
        print_json(data)
    else:
        for line in lines:
            ctx.console.print(line, highlight=False, markup=False)


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@click.option("--no-wait-ssh", is_flag=True, help="Return once the nodes run, without "
              "waiting for SSH.")
@json_option
def up(spec_file: str, timeout: float, no_wait_ssh: bool) -> None:
    """Provision the cluster, wait for SSH. Idempotent: a second run changes nothing."""
    from clusterkit.cluster.up import do_up

    ctx = get_ctx()
    result = do_up(spec_file, rt=_runtime(), timeout=timeout, wait_ssh=not no_wait_ssh)
    if ctx.json:
        print_json(result)


@click.command()
@click.argument("name", required=False)
@json_option
def status(name: str | None) -> None:
    """Nodes, roles, AZ, market, addresses, state and cost so far (found by tags).

    NAME is a cluster name (looked up in --region) or a spec file (its regions); without
    NAME every clusterkit cluster in --region is listed."""
    from clusterkit.cluster.status import do_status, render

    ctx = get_ctx()
    rt = _runtime()
    result = do_status(name, region=ctx.region, rt=rt)
    if ctx.json:
        print_json(result)
    else:
        render(rt, result)


@click.command()
@click.argument("target", metavar="SPEC|NAME")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@json_option
def down(target: str, yes: bool, timeout: float) -> None:
    """Delete everything the cluster owns (by spec file or NAME); nothing orphaned."""
    from clusterkit.cluster.down import do_down

    ctx = get_ctx()
    result = do_down(target, yes=yes or ctx.yes, region=ctx.region, rt=_runtime(),
                     confirm=lambda q: click.confirm(q, default=False, err=True),
                     timeout=timeout)
    if ctx.json:
        print_json(result)


COMMANDS = [plan, up, status, down]
