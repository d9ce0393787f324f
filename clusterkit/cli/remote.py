"""`clusterkit exec`, `clusterkit ssh`."""

import click

from clusterkit.errors import NotYetAvailable


@click.command("exec")
@click.argument("name")
@click.argument("command", nargs=-1, required=True)
def exec_(name: str, command: tuple[str, ...]) -> None:
    """Run a command on every node (agent forwarded); per-node results."""
    raise NotYetAvailable("exec")


@click.command()
@click.argument("name")
@click.argument("node", required=False)
def ssh(name: str, node: str | None) -> None:
    """Interactive shell on a node (default: the master), agent forwarded."""
    raise NotYetAvailable("ssh")


COMMANDS = [exec_, ssh]
