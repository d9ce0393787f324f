"""`clusterkit plan`, `up`, `status`, `down`."""

import click

from clusterkit.errors import NotYetAvailable


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
def plan(spec_file: str) -> None:
    """Show what `up` would create or change, the chosen offer and total $/h. Read-only."""
    raise NotYetAvailable("plan")


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
def up(spec_file: str) -> None:
    """Provision the cluster, wait for SSH, bootstrap every node. Idempotent."""
    raise NotYetAvailable("up")


@click.command()
@click.argument("name", required=False)
def status(name: str | None) -> None:
    """Nodes, roles, AZ, market, addresses, state and cost so far (found by tags)."""
    raise NotYetAvailable("status")


@click.command()
@click.argument("target")
def down(target: str) -> None:
    """Delete everything the cluster owns (by spec file or NAME); nothing orphaned."""
    raise NotYetAvailable("down")


COMMANDS = [plan, up, status, down]
