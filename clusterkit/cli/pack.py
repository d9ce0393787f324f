"""`clusterkit pack`."""

import click

from clusterkit.errors import NotYetAvailable


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("prefix")
@click.argument("root")
def pack(prefix: str, root: str) -> None:
    """Pack an image tree into MXNet RecordIO (.lst/.rec/.idx), im2rec-compatible."""
    raise NotYetAvailable("pack")


COMMANDS = [pack]
