"""`clusterkit validate`, `clusterkit schema`."""

import click

from clusterkit.errors import NotYetAvailable


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
def validate(spec_file: str) -> None:
    """Check a cluster spec (schema and meaning); no AWS call. Exit 2 if invalid."""
    raise NotYetAvailable("validate")


@click.command()
def schema() -> None:
    """Print the JSON Schema of cluster.yaml (for editor completion and checks)."""
    raise NotYetAvailable("schema")


COMMANDS = [validate, schema]
