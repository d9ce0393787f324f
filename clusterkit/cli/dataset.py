"""`clusterkit deploy-dataset`."""

import click

from clusterkit.cli.context import check_spec_argument
from clusterkit.errors import NotYetAvailable


@click.command("deploy-dataset")
@click.argument("spec_file", type=click.Path(dir_okay=False), callback=check_spec_argument)
@click.option("--snapshot", help="EBS snapshot id (snap-...) holding the dataset.")
def deploy_dataset(spec_file: str, snapshot: str | None) -> None:
    """Clone an EBS snapshot onto every node (one volume per node) and mount it read-only."""
    raise NotYetAvailable("deploy-dataset")


COMMANDS = [deploy_dataset]
