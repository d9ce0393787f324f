"""`clusterkit train`, `logs`, `stop`."""

import click

from clusterkit.cli.context import check_spec_argument, check_target_argument
from clusterkit.errors import NotYetAvailable


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False), callback=check_spec_argument)
@click.argument("command", nargs=-1)
def train(spec_file: str, command: tuple[str, ...]) -> None:
    """Start the distributed job (MXNet PS or torchrun) on every node; live logs; fail-fast."""
    raise NotYetAvailable("train")


@click.command()
@click.argument("name", callback=check_target_argument)
def logs(name: str) -> None:
    """Follow the running job's logs on all nodes."""
    raise NotYetAvailable("logs")


@click.command()
@click.argument("name", callback=check_target_argument)
def stop(name: str) -> None:
    """Stop the running job on all nodes."""
    raise NotYetAvailable("stop")


COMMANDS = [train, logs, stop]
